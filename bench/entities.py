"""Precision of the entities listed and of their types, on hand-labelled texts in English and Chinese.

    PYTHONPATH=. .venv/bin/python -m bench.entities [--show] [--typer rules|model|both] [--parts dev,held-out]

bench/entities_gold.json holds short texts from the shared chats and documents with every named
entity labelled (issue 28). Each text goes through `entities.extraction.find_mentions` as a memory's
text does (the chat's speakers known, and typed "person" as resolution types them; a name with no
type is "other"). Dates and amounts are typed values and are not scored here.

- entity precision: listed names that are a labelled entity (the same key, or one a whole-word part
  of the other: "Anna Pavlovna" for "Anna Pavlovna Scherer") / names listed;
- type precision: of those, the ones whose type is one the label accepts;
- recall: labelled entities listed (for information: the issue's targets are the two precisions).
Reported for all texts, for the "dev" part (looked at while revising the rules) and the "held-out"
part (labelled afterwards, only scored), the "held-out-2" part (labelled in session 10 before that
session's rule changes), each also by language, and per language over all.

`--typer` says who types the mentions: the rules of entities/extraction.py, the learned typer
(entities/typing_model.py, which reads the rules' type as one feature), or both side by side in one
run (the default; the mentions are the same, only their types differ). `--parts` scores only the
parts named (iterate on dev and held-out without looking at held-out-2).
"""

import json
import os
import re
import sys
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loci.settings")
django.setup()

from entities import extraction  # noqa: E402
from entities.extraction import find_mentions  # noqa: E402
from entities.resolution import entity_key  # noqa: E402

GOLD = Path(__file__).with_name("entities_gold.json")


def _same(a: str, b: str) -> bool:
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    pattern = re.escape(short)
    return bool(re.search(rf"(?<!\w){pattern}(?!\w)", long)) if re.search(r"[a-z]", short) else short in long


def score(texts: list[dict], show: bool = False) -> dict:
    listed = right = typed = labelled = found = 0
    for item in texts:
        speakers = {entity_key(s) for s in item["speakers"]}
        gold = [(entity_key(e[0]), set(e[1:])) for e in item["entities"]]
        predicted = {}
        for m in find_mentions(item["text"], frozenset(speakers)):
            if m.type in ("date", "amount"):
                continue
            key = entity_key(m.surface)
            kind = "person" if key in speakers else (m.type or "other")
            predicted.setdefault(key, kind)
        hit_gold = set()
        for key, kind in predicted.items():
            listed += 1
            match = next((i for i, (g, _) in enumerate(gold) if key == g), None)
            if match is None:
                match = next((i for i, (g, _) in enumerate(gold) if _same(key, g)), None)
            if match is None:
                if show:
                    print(f"  WRONG  {key!r} ({kind})  in: {item['text'][:60]}")
                continue
            right += 1
            hit_gold.add(match)
            if kind in gold[match][1]:
                typed += 1
            elif show:
                print(f"  TYPE   {key!r} {kind} ≠ {sorted(gold[match][1])}")
        labelled += len(gold)
        found += len(hit_gold)
        if show:
            for i, (g, kinds) in enumerate(gold):
                if i not in hit_gold:
                    print(f"  MISSED {g!r} {sorted(kinds)}")
    return {"texts": len(texts), "labelled": labelled, "listed": listed,
            "entity_precision": round(right / max(1, listed), 3), "type_precision": round(typed / max(1, right), 3),
            "recall": round(found / max(1, labelled), 3)}


def report_for(texts: list[dict], parts: list[str], show: bool) -> dict:
    report = {}
    if set(parts) == {"dev", "held-out", "held-out-2"}:
        report["all"] = score(texts, show)
    for part in parts:
        report[part] = score([t for t in texts if t.get("part") == part], show)
        for lang, chinese in (("en", False), ("zh", True)):
            report[f"{part} {lang}"] = score([t for t in texts if t.get("part") == part
                                               and bool(re.search(r"[\u4e00-\u9fff]", t["text"])) == chinese])
    if "all" in report:
        for lang, pick in (("en", lambda t: not re.search(r"[\u4e00-\u9fff]", t["text"])),
                           ("zh", lambda t: bool(re.search(r"[\u4e00-\u9fff]", t["text"])))):
            report[lang] = score([t for t in texts if pick(t)])
    return report


def _arg(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main() -> int:
    texts = json.loads(GOLD.read_text())["texts"]
    show = "--show" in sys.argv
    typer = _arg("--typer", "both")
    parts = _arg("--parts", "dev,held-out,held-out-2").split(",")
    typers = ("rules", "model") if typer == "both" else (typer,)
    reports = {}
    default = extraction.TYPER
    try:
        for name in typers:
            extraction.TYPER = name
            reports[name] = report_for(texts, parts, show)
    finally:
        extraction.TYPER = default
    print(json.dumps(reports if len(typers) > 1 else reports[typers[0]], indent=1))
    print(f"\n{'part':16s} {'texts':>5s} {'listed':>6s} {'entity P':>8s} " + " ".join(f"{'type P ' + n:>13s}" for n in typers))
    for key, row in reports[typers[0]].items():
        print(f"{key:16s} {row['texts']:5d} {row['listed']:6d} {row['entity_precision']:8.3f} "
              + " ".join(f"{reports[n][key]['type_precision']:13.3f}" for n in typers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
