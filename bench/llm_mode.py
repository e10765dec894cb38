"""LLM mode against the rules on LoCoMo conversation 0: the same sessions through the same REST API,
once with no LLM and once with a chat endpoint (issue 37, item 7).

    # the rules
    .venv/bin/python -m bench.llm_mode --sessions 3
    # a model on an OpenAI-compatible endpoint (here: SmolLM2 on llama-cpp-python, tests/real_llm.py)
    LOCI_LLM=1 OPENAI_BASE_URL=http://127.0.0.1:8088/v1 OPENAI_API_KEY=none LLM_MODEL=smollm2-135m \\
        LLM_CONTEXT_TOKENS=2048 LLM_MAX_TOKENS=320 .venv/bin/python -m bench.llm_mode --sessions 3

The first `--sessions` sessions of the conversation are posted and flushed (bench.locomo: one
session_id per LoCoMo session, `wait`, so extraction runs in the request), then:
- evidence recall@5/10/20 of hybrid search over the questions (categories 1-4) whose evidence lies
  wholly in those sessions (bench.locomo's mapping of results to dia_ids);
- the stored profile items scored against bench/profiles_gold.json's items of the conversation
  (bench.profiles.matches), precision over the items and recall over the gold items — the gold covers
  all 19 sessions, so recall is low for any reader on a few of them: compare the two rows, not to 1;
- which mode wrote the memories (extraction_mode) and the model's calls per step and outcome.
"""

import argparse
import json
import os
import sys
import time
from collections import Counter, defaultdict

from bench.harness import api_client, close_stack, conversation_stack, search_message_ids
from bench.locomo import DEFAULT_PATH, KS, ingest, load, recall


def within(conv: dict, sessions: int) -> dict:
    """The conversation cut to its first `sessions` sessions, with the questions they answer."""
    kept = conv["sessions"][:sessions]
    said = {t["dia_id"] for s in kept for t in s["turns"]}
    return {**conv, "sessions": kept, "questions": [q for q in conv["questions"] if set(q["evidence"]) <= said]}


def profile_scores(user_id: str, conversation: int) -> dict:
    from bench.profiles import GOLD, matches
    from memory.models import Memory

    gold = [g for g in json.loads(GOLD.read_text())["items"] if g["conversation"] == conversation]
    items = [(m.metadata.get("subject", ""), m.metadata.get("category", ""), m.metadata.get("value", ""))
             for m in Memory.objects.filter(user_id=user_id, kind=Memory.Kind.PROFILE, status="active")]
    right = [p for p in items if any(matches(p, g) for g in gold)]
    found = {i for i, g in enumerate(gold) if any(matches(p, g) for p in items)}
    return {"profile_items": len(items), "profile_precision": round(len(right) / len(items), 3) if items else None,
            "profile_recall": round(len(found) / len(gold), 3), "gold_items": len(gold)}


def llm_calls() -> dict:
    """loci_llm_calls_total of this process, by step and outcome."""
    from common import metrics

    out = {}
    for family in metrics.LLM_CALLS.collect():
        for sample in family.samples:
            if sample.name.endswith("_total") and sample.value:
                out[f"{sample.labels['step']}:{sample.labels['outcome']}"] = int(sample.value)
    return out


def run(conversation: int, sessions: int, top_k: int, log=print) -> dict:
    if os.environ.get("LOCI_LLM"):  # conversation_stack turns the LLM off unless told otherwise
        os.environ.setdefault("LLM_DISABLED", "0")
    var = conversation_stack(os.environ.get("BENCH_EMBEDDING_CACHE"))
    try:
        from django.conf import settings

        from memory.models import Memory

        client = api_client()
        conv = within(load(DEFAULT_PATH, [conversation])[0], sessions)
        stats = defaultdict(float)
        started = time.perf_counter()
        ingest(client, conv, stats)
        ingest_seconds = time.perf_counter() - started
        log(f"{sum(len(s['turns']) for s in conv['sessions'])} turns ingested in {ingest_seconds:.0f}s; "
            f"{len(conv['questions'])} questions")
        sums = Counter()
        for q in conv["questions"]:
            ranked = search_message_ids(client, q["question"], "hybrid", conv["user_id"], top_k)
            for k in KS:
                sums[k] += recall(ranked, q["evidence"], k)
        n = len(conv["questions"]) or 1
        from memory.models import Message

        modes = Counter(Memory.objects.filter(user_id=conv["user_id"]).values_list("extraction_mode", flat=True))
        episodes = Memory.objects.filter(user_id=conv["user_id"], kind=Memory.Kind.EPISODE)
        facts = Memory.objects.filter(user_id=conv["user_id"], kind=Memory.Kind.ATOMIC_FACT)
        return {"mode": f"llm ({settings.LLM_MODEL})" if settings.LLM_ENABLED else "rules",
                "conversation": conversation, "sessions": sessions,
                "turns": sum(len(s["turns"]) for s in conv["sessions"]), "questions": len(conv["questions"]),
                **{f"R@{k}": round(sums[k] / n, 3) for k in KS},
                **profile_scores(conv["user_id"], conversation),
                "episodes": episodes.count(), "facts": facts.count(),
                "turns_left_pending": Message.objects.filter(user_id=conv["user_id"], segment_id__isnull=True).count(),
                "memories_by_mode": dict(modes), "llm_calls": llm_calls(),
                "ingest_seconds": round(ingest_seconds, 1)}
    finally:
        close_stack(var, False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conv", type=int, default=0, help="LoCoMo conversation (default 0)")
    parser.add_argument("--sessions", type=int, default=3, help="its first N sessions (default 3)")
    parser.add_argument("--top-k", type=int, default=20)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.conv, args.sessions, args.top_k, log=lambda s: print(s, file=sys.stderr))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
