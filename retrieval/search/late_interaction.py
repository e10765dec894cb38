"""The late-interaction stage: hybrid's candidates rescored by ColBERT MaxSim of their English sources.

Hybrid answers the request's top_k and appends the best of what its recall and expansion already
scored, up to SEARCH_LATE_INTERACTION_CANDIDATES items (hybrid.runners_up: asking it for 30 items
instead widened its recall and expansion, p95 3.24x at 10k); each
fact and episode of an English query gets the best MaxSim against the query (retrieval/runtimes/colbert.py)
of its English sources — a memory's cited messages (a memory citing none and without a document,
itself; documents' items have none: on English documents the stage lost) — from the token vectors stored at ingestion
(retrieval/backends/token_vectors.py; a source without stored vectors of the current model is encoded now,
so a model change or a row not yet projected never leaves a hole), and a new calibrated relevance:

    P(relevant) = σ(a · logit(hybrid's relevance) + b · MaxSim + c)      (a, b, c: SEARCH_LATE_INTERACTION_MAP)

its order hybrid + (b/a)·MaxSim chosen for R@10 on LoCoMo dev conversations (bench/rank_stages.py), its
scale and bias fitted by logistic regression on short chats, one LoCoMo dev session each
(bench/fit_late_interaction.py; bench/RESULTS.md, "Late interaction on by default"): fitted on whole
conversations instead, the 0.01 floor left out right answers of ten-line chats. It is monotone in
hybrid's relevance, and it stays a probability, so the floor and the merged order read it as before.
A Chinese or mixed query, or an item with no English source, keeps hybrid's relevance: the model is
English.
"""

import logging
import math

from django.conf import settings

from retrieval.backends import token_vectors
from retrieval.relevance import rescored, script
from retrieval.search.pipeline import HYBRIDS, LISTS, RESULTS, Found, When
from retrieval.search.scoring import at_most_per_key

log = logging.getLogger(__name__)

KEY_OF = {"facts": "memory", "episodes": "memory", "chunks": "chunk"}


class LateInteraction:
    name = "late_interaction"
    help = "ColBERT MaxSim of an English query against the items' English sources (SEARCH_LATE_INTERACTION)"
    reads = ("req", "method_used", *RESULTS)
    writes = RESULTS
    # Agentic answers as agentic or hybrid (method_used): either is one of HYBRIDS, as the request's method is.
    applies = When(methods=HYBRIDS, setting="SEARCH_LATE_INTERACTION", script="latin")

    def run(self, found: Found) -> None:
        rescore(found.req.query, found.response)
        spread_facts(found.response, settings.MRAG_FACTS_PER_MESSAGE)  # the stage re-sorted them


def text_of(item: dict) -> str:
    return item.get("atomic_fact") or item.get("summary") or item.get("text") or ""


def relevance(hybrid: float, maxsim: float) -> float:
    return rescored(hybrid, maxsim, settings.SEARCH_LATE_INTERACTION_MAP)


def rescore(query: str, response: dict) -> None:
    """Rescore the items of `response` with English sources in place and re-sort each list (the caller
    cuts them back to the request's top_k).

    A model that cannot run (its package missing, a file not the pinned one) degrades the search to
    hybrid's own scores with a warning, as a reranker outage does: it must not fail the search."""
    items = [(key, item) for key in KEY_OF for item in response.get(key, [])]  # the kinds with sources
    try:
        _score(query, items)
    except Exception as exc:
        log.warning("late interaction failed, keeping hybrid's relevance: %s", exc)
        for _, item in items:
            item["score"] = item["scores"].pop("hybrid_relevance", item["score"])
            item["scores"].pop("late_interaction", None)
    for key in LISTS:
        if key in response:
            response[key] = sorted(response[key], key=lambda it: it["score"], reverse=True)


def source_keys(items: list[tuple[str, dict]], of_memory: dict[str, list[str]] | None = None) -> list[list[str]]:
    """Each item's sources in the projection (token_vectors.sources, or `of_memory`: its answer); a
    document's chunk has none."""
    if of_memory is None:
        memory_pks = [str(item["id"]) for key, item in items if KEY_OF[key] == "memory"]
        of_memory = token_vectors.sources(memory_pks) if memory_pks else {}
    return [of_memory.get(str(item["id"]), []) if KEY_OF[key] == "memory" else [] for key, item in items]


def _score(query: str, items: list[tuple[str, dict]]) -> None:
    from retrieval.runtimes import colbert

    if not items:
        return
    model, of_memory, stored = token_vectors.stored_sources(
        [str(item["id"]) for key, item in items if KEY_OF[key] == "memory"])
    keys = source_keys(items, of_memory)
    wanted = list(dict.fromkeys(k for ks in keys for k in ks))
    missing = [k for k in wanted if k not in stored]
    if missing:  # not projected yet (or of another model): encoded now, English ones only
        own = {f"{KEY_OF[key]}:{item['id']}": text_of(item) for key, item in items}
        english = {k: t for k, t in token_vectors.texts(missing, own).items() if script(t) == "latin"}
        stored.update({k: colbert.quantise(m) for k, m in
                       zip(english, model.encode_documents(list(english.values())) if english else [])})
    query_vectors = model.encode_query(query)
    best: dict[str, float] = {}
    for ks, (_, item) in zip(keys, items):
        scores = [best.setdefault(k, colbert.maxsim(query_vectors, stored[k])) for k in ks if k in stored]
        if not scores or not math.isfinite(max(scores)):
            continue  # no English source: hybrid's relevance stands
        score = max(scores)
        hybrid = item["score"]
        item["scores"]["hybrid_relevance"] = hybrid
        item["scores"]["late_interaction"] = round(score, 6)
        item["score"] = round(relevance(hybrid, score), 6)


def spread_facts(response: dict, per_message: int) -> None:
    """At most `per_message` facts of any one message ahead of the rest, as hybrid's own spread
    (MRAG_FACTS_PER_MESSAGE, scoring.spread_over_messages), again after a rescoring stage re-sorted
    the list: the late-interaction stage scores a fact by its source message, so the facts of one
    message rise together and would fill the list again. Surplus facts follow, in score order."""
    facts = response.get("facts")
    if not per_message or not facts:
        return
    response["facts"] = at_most_per_key(facts, lambda fact: next(
        ((s.get("session_id"), s["message_id"]) for s in fact.get("sources", []) if s.get("type") == "message"),
        None), per_message)
