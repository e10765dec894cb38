"""Supersede on fresh update pairs: the rules (claims.py) and the statement model side by side, one run.

    python -m bench.statements [--fresh 2] [--no-cosine] [--misses]

Each pair of bench/supersede_fresh.json (written before the model was trained) goes through the
product's path without a database: the deterministic extractor turns each message of user "Alex"
into facts (third person, as stored), and a new fact supersedes an old one when the reader says so
and, as in conversations/consolidation.py, their e5 cosine is at least SUPERSEDE_MIN_COSINE.
Readers: "rules" (claims.py's patterns, the old way), "tokens" (the statement model's token tags,
statement_contradicts), and "product" (claims.supersedes, what consolidation runs: where the token model or the e5 head reads
a state change, the slot it changes against the slot the older fact holds, each read by the tokens,
the head or the patterns; the patterns alone for what the model has no slot for), also without the head. Reports, per language: updates superseded (target ≥ 90 %) and non-updates wrongly superseded (target 0).
"""

import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loci.settings")
django.setup()

from conversations.claims import claim, contradicts, statement_contradicts, supersedes  # noqa: E402
from conversations.statements import read, readings  # noqa: E402
from conversations.consolidation import SUPERSEDE_MIN_COSINE  # noqa: E402
from extraction.base import ExtractionUnit, Passage  # noqa: E402
from extraction.deterministic import DeterministicExtractor  # noqa: E402

WHEN = datetime(2026, 12, 1, tzinfo=timezone.utc)


def facts(message: str) -> list[tuple[str, str]]:
    zh = any("\u4e00" <= c <= "\u9fff" for c in message)
    unit = ExtractionUnit("", [Passage("1", message, "Alex", WHEN)], "zh" if zh else "en", WHEN,
                          {"participants": ["Alex", "assistant"]})
    return [(f.text, f.subject or "Alex") for f in DeterministicExtractor().extract(unit).facts]


def main() -> int:
    cosine = "--no-cosine" not in sys.argv
    gate = float(sys.argv[sys.argv.index("--cosine") + 1]) if "--cosine" in sys.argv else SUPERSEDE_MIN_COSINE
    from retrieval.embeddings import embedder

    embed = embedder().embed_documents
    which = sys.argv[sys.argv.index("--fresh") + 1] if "--fresh" in sys.argv else "1"
    fresh = Path(__file__).with_name("supersede_fresh.json" if which == "1" else f"supersede_fresh{which}.json")
    pairs = json.loads(fresh.read_text())["pairs"]
    print(f"{fresh.name}: {len(pairs)} pairs")

    readers = {
        "rules": lambda new, old, subject, rn, ro: contradicts(claim(new), claim(old)),
        "tokens": lambda new, old, subject, rn, ro: statement_contradicts(read(new, subject), read(old, subject)),
        "product without head": lambda new, old, subject, rn, ro: supersedes(new, old, subject),
        "product": lambda new, old, subject, rn, ro: supersedes(new, old, subject, rn, ro),
    }
    tally = {(r, lang, upd): [0, 0] for r in readers for lang in ("en", "zh") for upd in (True, False)}
    misses = {r: [] for r in readers}
    for pair in pairs:
        old_facts, new_facts = facts(pair["old"]), facts(pair["new"])
        close, rn, ro = {}, [], []
        if old_facts and new_facts:
            vo, vn = embed([t for t, _ in old_facts]), embed([t for t, _ in new_facts])
            rn, ro = readings(vn), readings(vo)
            close = {(i, j): not cosine or float(vn[i] @ vo[j]) >= gate
                     for i in range(len(new_facts)) for j in range(len(old_facts))}
        for name, reader in readers.items():
            hit = any(close.get((i, j), True) and reader(nt, ot, ns, rn[i], ro[j])
                      for i, (nt, ns) in enumerate(new_facts) for j, (ot, _) in enumerate(old_facts))
            cell = tally[(name, pair["lang"], pair["update"])]
            cell[0] += hit
            cell[1] += 1
            if hit != pair["update"]:
                misses[name].append((pair["update"], pair["old"], pair["new"]))
    print(f"cosine gate: {'on' if cosine else 'off'} (≥ {gate})")
    print("| reader | updates superseded EN | ZH | all | non-updates superseded EN | ZH | all |")
    print("|---|---|---|---|---|---|---|")
    for name in readers:
        row = []
        for upd in (True, False):
            en, zh = tally[(name, "en", upd)], tally[(name, "zh", upd)]
            row += [f"{en[0]}/{en[1]}", f"{zh[0]}/{zh[1]}", f"{en[0] + zh[0]}/{en[1] + zh[1]}"]
        print(f"| {name} | " + " | ".join(row) + " |")
    if "--misses" in sys.argv:
        for name, rows in misses.items():
            print(f"\n{name} wrong:")
            for upd, old, new in rows:
                print(f"  {'missed update' if upd else 'wrong supersede'}: {old} -> {new}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
