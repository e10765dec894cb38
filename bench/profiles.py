"""Precision and recall of the deterministic profiles on LoCoMo conversations 0-2 against bench/profiles_gold.json.

The conversation's sessions go through the deterministic extractor in MemCell-sized units (12 turns),
as a flush would; the facts are folded with the rules of ingest/conversation/profile_rules.py the way
ingest/conversation/profiles.py stores them (single-valued categories superseded by the newer value,
interests from INTEREST_MIN_FACTS facts). Also times the rules per MemCell (the per-flush cost).

    PYTHONPATH=. .venv/bin/python bench/profiles.py
"""

import json
import os
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loci.settings")
django.setup()

from ingest.conversation.profile_rules import SINGLE_VALUED, interests_in, items_in  # noqa: E402
from ingest.conversation.profiles import INTEREST_MIN_FACTS  # noqa: E402
from ingest.extraction.base import ExtractionUnit, Passage  # noqa: E402
from ingest.extraction.deterministic import DeterministicExtractor  # noqa: E402

DATA = Path(os.environ.get("LOCI_SHARED_DATA", "/work/shared/data")) / "locomo" / "locomo10_dev.json"
GOLD = Path(__file__).with_name("profiles_gold.json")
MEMCELL = 12
GROUPS = {"origin": "location", "interest": "preference"}


def profile(conversation: dict) -> tuple[list[tuple], list[float]]:
    conv = conversation["conversation"]
    names = [conv["speaker_a"], conv["speaker_b"]]
    sessions = sorted((int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k)))
    extractor, items, mentions, timings = DeterministicExtractor(), {}, {}, []
    for n in sessions:
        when = datetime.strptime(conv[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)
        turns = conv[f"session_{n}"]
        for start in range(0, len(turns), MEMCELL):
            passages = [Passage(t["dia_id"], t["text"], t["speaker"], when) for t in turns[start:start + MEMCELL]]
            facts = extractor.extract(ExtractionUnit("", passages, "en", when, {"participants": names})).facts
            began = time.perf_counter()
            for order, fact in enumerate(facts):
                stamp = (n, start, order)
                for item in items_in(fact.text, fact.subject, names):
                    if item.category in SINGLE_VALUED:  # the newer value supersedes
                        for key in [k for k in items if k[:2] == (item.subject, item.category) and k[2] != item.key]:
                            items.pop(key)
                    items[(item.subject, item.category, item.key)] = stamp
                for label in interests_in(fact.text) if fact.subject else ():
                    mentions[(fact.subject, label)] = mentions.get((fact.subject, label), 0) + 1
            timings.append((time.perf_counter() - began) * 1000)
    found = list(items) + [(s, "interest", label) for (s, label), c in mentions.items() if c >= INTEREST_MIN_FACTS]
    return found, timings


def matches(pred: tuple, gold: dict) -> bool:
    subject, category, value = pred
    if subject != gold["subject"] or GROUPS.get(category, category) != GROUPS.get(gold["category"], gold["category"]):
        return False
    words = [w[:5] for w in re.findall(r"[a-z]+", gold["value"].lower()) if len(w) > 2]
    return any(w in value.lower() for w in words)


def main() -> int:
    data = json.loads(DATA.read_text())
    gold = json.loads(GOLD.read_text())["items"]
    tp_pred = fp = 0
    hit_gold = set()
    all_timings = []
    for c in (0, 1, 2):
        predicted, timings = profile(data[c])
        all_timings += timings
        golds = [(i, g) for i, g in enumerate(gold) if g["conversation"] == c]
        for pred in predicted:
            hits = [i for i, g in golds if matches(pred, g)]
            if hits:
                tp_pred += 1
                hit_gold.update(hits)
            else:
                fp += 1
        print(f"conversation {c}: {len(predicted)} items, gold {len(golds)}, "
              f"gold found {len([i for i, _ in golds if i in hit_gold])}")
    precision = tp_pred / max(1, tp_pred + fp)
    recall = len(hit_gold) / len(gold)
    all_timings.sort()
    print(json.dumps({"gold_items": len(gold), "predicted": tp_pred + fp, "precision": round(precision, 3),
                      "recall": round(recall, 3), "memcells": len(all_timings),
                      "rules_ms_per_memcell_p50": round(all_timings[len(all_timings) // 2], 3),
                      "rules_ms_per_memcell_max": round(all_timings[-1], 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
