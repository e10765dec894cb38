"""The multilingual rescoring stage: hybrid's Chinese and Chinese<->English items scored by e5x-rerank.

The late-interaction stage judges English items of English queries (an English model); this one
judges every other pair: a Chinese or mixed query's items, and an English query's Chinese items.
The top SEARCH_MULTILINGUAL_RERANK_TOP of those by hybrid's relevance (all lists together) are
scored by the bundled reranker (retrieval/runtimes/e5_rerank.py: e5-small's cosine plus a trained joint
layer), and each gets a new calibrated relevance

    P(relevant) = σ(a · logit(hybrid's relevance) + b · reranker score + c)   (SEARCH_MULTILINGUAL_RERANK_MAP)

fitted by logistic regression on CMRC's even questions (bench/fit_multilingual.py; bench/RESULTS.md).
It stays a probability, so the floor (MRAG_MIN_RELEVANCE) and the merged order read it as before:
a nonsense or off-topic Chinese query, whose items hybrid alone scored over the floor, gets
"nothing answers well". An item past the top is not scored (the reranker costs a model run per
item); it is judged as if it had the lowest reranker score of those scored, which keeps hybrid's
order among the unscored and never lifts one over a scored item it trailed.
"""

import logging
import math

from django.conf import settings

from retrieval.embeddings import embedder
from retrieval.relevance import rescored, script
from retrieval.search.pipeline import HYBRIDS, RESULTS, Found, When

log = logging.getLogger(__name__)

KEYS = ("facts", "episodes", "chunks")  # agent memory (cases, skills) keeps hybrid's relevance


class Multilingual:
    name = "multilingual"
    help = "the multilingual reranker on Chinese and cross-language items (SEARCH_MULTILINGUAL_RERANK)"
    reads = ("req", "method_used", *RESULTS)
    writes = RESULTS
    applies = When(methods=HYBRIDS, setting="SEARCH_MULTILINGUAL_RERANK")

    def run(self, found: Found) -> None:
        rescore(found.req.query, found.response)


def text_of(item: dict) -> str:
    return item.get("atomic_fact") or item.get("summary") or item.get("text") or ""


def judged_here(query_script: str, text: str) -> bool:
    """Not an English item of an English query (the late-interaction stage's, or hybrid's alone)."""
    return query_script != "latin" or script(text) != "latin"


def relevance(hybrid: float, score: float) -> float:
    return rescored(hybrid, score, settings.SEARCH_MULTILINGUAL_RERANK_MAP)


_model = None


def model():
    """The reranker, loaded once per process: its ONNX graph built (cached on disk by its identity)
    and its session open, so the warm-up that calls this leaves no load to a search's CPU budget."""
    global _model
    from retrieval.runtimes.e5_rerank import E5CrossReranker

    if _model is None or _model.precision != settings.RERANK_MULTILINGUAL_PRECISION:
        loaded = E5CrossReranker(models_dir=settings.LOCI_MODELS_DIR, precision=settings.RERANK_MULTILINGUAL_PRECISION,
                                 threads=1)
        loaded.runtime  # the constructor only names the model; this builds the graph and opens the session
        _model = loaded
    return _model


def index_vectors(reranker, query: str, texts: list[str]) -> dict:
    """The live index's own e5 vectors of the query and the items (the embedding cache holds every
    ingested text's), when the index is embedded by the reranker's embedder: its score is residual on
    that cosine. Otherwise the reranker embeds them itself."""
    live = embedder()
    if live.name != reranker.embedder.name:
        return {}
    return {"query_vector": live.embed_query(query), "vectors": live.embed_documents(texts)}


def rescore(query: str, response: dict) -> None:
    """Rescore the judged items of `response` in place and re-sort each list.

    A model that cannot run degrades the search to hybrid's own relevance with a warning, as a
    reranker outage does: it must not fail the search."""
    query_script = script(query)
    items = [item for key in KEYS for item in response.get(key, []) if judged_here(query_script, text_of(item))]
    if not items:
        return
    items.sort(key=lambda it: it["score"], reverse=True)
    top = items[: settings.SEARCH_MULTILINGUAL_RERANK_TOP]
    try:
        reranker = model()
        texts = [text_of(item) for item in top]
        scores = reranker.rerank(query, texts, **index_vectors(reranker, query, texts))
    except Exception as exc:
        log.warning("multilingual rescoring failed, keeping hybrid's relevance: %s", exc)
        return
    floor_score = min(scores)
    for position, item in enumerate(items):
        score = scores[position] if position < len(top) else floor_score
        hybrid = item["score"]
        item["scores"]["hybrid_relevance"] = hybrid
        if position < len(top):
            item["scores"]["multilingual"] = round(score, 4)  # the "why" view's score of this stage
        if math.isfinite(score):
            item["score"] = round(relevance(hybrid, score), 6)
    for key in KEYS:
        if key in response:
            response[key] = sorted(response[key], key=lambda it: it["score"], reverse=True)
