"""Agentic search: hybrid, an LLM sufficiency check, complementary queries, merge, rerank.

One deadline (LLM_SEARCH_DEADLINE_SECONDS) covers the whole search: the sufficiency check gets the
time left, and round 2 answers with the queries that finished in time (hybrid's alone if none did).
"""

import logging
from concurrent.futures import ThreadPoolExecutor, wait

from django.conf import settings
from django.db import connections

from common.llm_scope import llm_scope, seconds_left
from retrieval.search.rerank import rerank_items

log = logging.getLogger(__name__)
MERGE_LIMIT = 40  # the open EverOS implementation caps the merged pool at 40

SUFFICIENCY_PROMPT = """You judge whether retrieved memories are enough to answer a question.
Question: {query}

Retrieved memories:
{memories}

Answer in JSON: {{"is_sufficient": true|false, "reasoning": "...", "missing_information": ["..."],
"queries": ["2 or 3 complementary search queries that would find what is missing, in the question's language"]}}"""


MAX_QUERIES = 3  # the prompt asks for 2 or 3; round 2 runs each as a hybrid search in a thread of its own
MAX_MISSING = 5
# The verdict's JSON Schema, sent where the server takes one (common/llm_formats.py): what check_verdict
# accepts. No maxLength: llama.cpp's grammar fails on it (extraction/llm.py).
VERDICT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["is_sufficient", "reasoning", "missing_information", "queries"],
    "properties": {
        "is_sufficient": {"type": "boolean"},
        "reasoning": {"type": "string"},
        "missing_information": {"type": "array", "maxItems": MAX_MISSING, "items": {"type": "string"}},
        "queries": {"type": "array", "maxItems": MAX_QUERIES, "items": {"type": "string", "minLength": 1}},
    },
}


def check_verdict(payload: dict) -> None:
    """The verdict's shape, or ValueError (complete_json retries it, then hybrid answers): its fields
    go into the response as they are, and an insufficient verdict must say what to search next."""
    if not isinstance(payload.get("is_sufficient"), bool):
        raise ValueError("is_sufficient must be a boolean")
    if not isinstance(payload.get("reasoning", ""), str):
        raise ValueError("reasoning must be a string")
    for key in ("missing_information", "queries"):
        items = payload.get(key, [])
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            raise ValueError(f"{key} must be a list of strings")
    if not payload["is_sufficient"] and not any(q.strip() for q in payload.get("queries", [])):
        raise ValueError("an insufficient verdict must give the queries that would find what is missing")


def agentic_search(run) -> tuple[dict, list[str]]:
    """Returns (response, notes); with no LLM, or when it fails, the answer is hybrid's and a note says so."""
    with llm_scope(seconds=settings.LLM_SEARCH_DEADLINE_SECONDS, tenant_id=run.scope.tenant.pk):
        return _agentic_search(run)


def _agentic_search(run) -> tuple[dict, list[str]]:
    from common.llm import LlmError, complete_json, llm_client

    first = run.hybrid()
    if llm_client() is None:
        return first, ["No LLM is configured: answered with hybrid search."]
    items = first["facts"] + first["episodes"]
    items = rerank_items(run.req.query, items)
    listing = "\n".join(f"[{i + 1}] {_text(it)}" for i, it in enumerate(items[:15])) or "(nothing found)"
    try:
        verdict = complete_json(
            [{"role": "user", "content": SUFFICIENCY_PROMPT.format(query=run.req.query, memories=listing)}],
            schema_check=check_verdict,
            step="sufficiency",
            schema=VERDICT_SCHEMA,
        )
    except LlmError as exc:
        log.warning("agentic sufficiency check failed: %s", exc)
        return first, [f"The LLM sufficiency check failed ({exc}): answered with hybrid search."]
    first["agentic"] = {"round": 1, "is_sufficient": verdict["is_sufficient"], "reasoning": verdict.get("reasoning", ""),
                        "missing_information": verdict.get("missing_information", [])[:MAX_MISSING]}
    if verdict["is_sufficient"]:
        return first, []
    queries = [q.strip() for q in verdict["queries"] if q.strip()][:MAX_QUERIES]  # some: check_verdict
    pool = ThreadPoolExecutor(max_workers=len(queries))
    futures = [pool.submit(_round_two, run, q) for q in queries]
    left = seconds_left()
    done, late = wait(futures, timeout=None if left is None else max(0.0, left))
    # Not waiting for the late ones: their engine calls have deadlines of their own and end by themselves.
    pool.shutdown(wait=False, cancel_futures=True)
    rounds = [f.result() for f in futures if f in done]
    merged = _merge([first, *rounds])
    merged["agentic"] = {**first["agentic"], "round": 2, "queries": queries}
    if late:
        return merged, [f"{len(late)} of {len(queries)} complementary queries missed the search's deadline "
                        "(LLM_SEARCH_DEADLINE_SECONDS): answered with what was found in time."]
    return merged, []


def _round_two(run, query: str) -> dict:
    try:
        return run.with_query(query).hybrid()
    finally:
        # Django closes the request thread's connections at the end of a request; a pool thread's
        # own (hybrid hydrates its items through the ORM) would stay open until garbage collected.
        connections.close_all()


def _merge(responses: list[dict]) -> dict:
    """Union by id keeping each item's best score, capped at MERGE_LIMIT, then reranked by the caller's reranker."""
    best: dict[tuple[str, str], dict] = {}
    for response in responses:
        for key in ("facts", "episodes", "chunks"):
            for item in response.get(key, []):
                slot = (key, str(item["id"]))
                if slot not in best or item["score"] > best[slot]["score"]:
                    best[slot] = item
    out = {"facts": [], "episodes": [], "chunks": []}
    for (key, _), item in sorted(best.items(), key=lambda kv: kv[1]["score"], reverse=True)[:MERGE_LIMIT]:
        out[key].append(item)
    return out


def _text(item: dict) -> str:
    return item.get("atomic_fact") or item.get("summary") or item.get("text") or ""
