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
from retrieval.relevance import logit, platt, script
from retrieval.search.coverage import spread_facts
from retrieval.search.pipeline import HYBRIDS, LISTS, RESULTS, Found, When

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


def applies(query: str, method: str) -> bool:
    return bool(settings.SEARCH_LATE_INTERACTION) and method in HYBRIDS and script(query) == "latin"


def text_of(item: dict) -> str:
    return item.get("atomic_fact") or item.get("summary") or item.get("text") or ""


def relevance(hybrid: float, maxsim: float) -> float:
    a, b, c = settings.SEARCH_LATE_INTERACTION_MAP
    return platt(a * logit(hybrid) + b * maxsim, 1.0, c)


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


def source_keys(items: list[tuple[str, dict]]) -> list[list[str]]:
    """Each item's sources in the projection (token_vectors.sources); a document's chunk has none."""
    memory_pks = [str(item["id"]) for key, item in items if KEY_OF[key] == "memory"]
    of_memory = token_vectors.sources(memory_pks) if memory_pks else {}
    return [of_memory.get(str(item["id"]), []) if KEY_OF[key] == "memory" else [] for key, item in items]


def _score(query: str, items: list[tuple[str, dict]]) -> None:
    from retrieval.runtimes import colbert

    if not items:
        return
    model = token_vectors.model()
    keys = source_keys(items)
    wanted = list(dict.fromkeys(k for ks in keys for k in ks))
    stored = token_vectors.load(wanted, model.name)
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
