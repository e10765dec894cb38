"""The search playground: the same search() as the API, rendered with highlights, sources and per-stage scores."""

import json
import logging
import shlex

from django.contrib.auth.decorators import login_required

from console.shell import console_scope, current_kb, location_label, render_page
from memory.models import Document
from retrieval.highlight import highlight, query_terms
from retrieval.request import MAX_TOP_K, METHODS, SearchError, parse_search_request
from retrieval.search import EngineError, search
from retrieval.search.pipeline import LISTS
from retrieval.search.order import PIPELINE

log = logging.getLogger(__name__)

DEFAULT_TOP_K = 10
SCOPE_FIELDS = ("user_id", "agent_id", "group_id", "run_id", "metadata")  # the form's scope and metadata filters
DOCUMENT_CHOICES = 300  # the document filter lists the most recent ready documents
KIND_OF_LIST = {"episodes": "episode", "facts": "fact", "chunks": "chunk", "agent_memory": "case",
                "profiles": "profile"}
# The "why" view: each stage in pipeline order, with what it measures.
STAGES = [
    ("bm25", "BM25 keyword relevance over jieba-segmented text"),
    ("cosine", "cosine similarity of the query and item embeddings"),
    ("rrf", "reciprocal rank fusion of the dense and BM25 rankings"),
    ("fused", "relevance from cosine and BM25 (logistic fusion)"),
    ("fact", "the fact's own fused score"),
    ("episode", "its parent episode's fused score"),
    ("alpha", "weight of the fact score in the final blend"),
    ("final", "α·fact + (1−α)·episode"),
    ("hybrid_relevance", "hybrid's calibrated relevance, before late interaction"),
    ("late_interaction", "ColBERT MaxSim of the query's tokens and its best English source's (message, chunk)"),
    ("covered", "× this: the facts above already cite all its messages"),
    ("rerank", "the reranker's score"),
    ("superseded_of", "out of date: the score of the newer fact that replaced this one, which is listed just above it (just under it for a question about the past)"),
]
# The trail's first step is the method's own relevance; the other steps are the pipeline's stages.
TRAIL_HELP = {stage.name: stage.help for stage in PIPELINE} | {
    "retrieve": "the method's calibrated relevance (0–1), from the scores above"}
METHOD_HELP = {
    "keyword": "BM25 only",
    "vector": "embeddings only",
    "hybrid": "episodes, then their facts (mRAG)",
    "agentic": "hybrid + LLM follow-up queries",
    "paths": "evidence paths across sessions (experimental)",
    "navigate": "document sections by their titles, then the chunks inside the best",
}


@login_required
def search_page(request):
    scope = console_scope(request)
    params = request.GET
    kb = current_kb(request, scope)
    form = {
        "q": params.get("q", "").strip(),
        "method": params.get("method") or "hybrid",
        "kb": params.get("kb", kb.slug if kb else ""),
        "document": params.get("document", ""),
        "top_k": params.get("top_k") or str(DEFAULT_TOP_K),
        "chunks": params.get("chunks", "1" if "q" not in params else ""),
        "summaries": params.get("summaries", ""),  # the summary tree's nodes (issue 39): asked for, never by default
        **{key: params.get(key, "").strip() for key in SCOPE_FIELDS},
    }
    context = {"section": "search", "form": form, "methods": [(m, METHOD_HELP[m]) for m in METHODS],
               "max_top_k": MAX_TOP_K, "kbs": scope.knowledge_bases().order_by("name"),
               "documents": _document_choices(scope, form["kb"])}
    if not form["q"]:
        return render_page(request, scope, "retrieval/search.html", context)
    status = 200
    try:
        body = _request_body(form)
        context["curl"] = curl_command(request, scope, body)
        response = search(scope, parse_search_request(body))
        context["results"] = _decorate(response, query_terms(form["q"]))
    except SearchError as exc:
        context["error"], status = str(exc), 400
    except EngineError as exc:
        context["error"], context["unavailable"], status = str(exc), True, exc.status
    except Exception as exc:  # an index or model backend is down: say so instead of a bare 500
        log.exception("console search failed")
        context["error"], context["unavailable"], status = f"{type(exc).__name__}: {exc}", True, 503
    return render_page(request, scope, "retrieval/search.html", context, status=status)


def curl_command(request, scope, body: dict) -> str:
    """The exact API request this search made, for a terminal: an API key replaces the console's session."""
    payload = json.dumps(body, ensure_ascii=False)
    return (f"curl -X POST {shlex.quote(request.build_absolute_uri('/api/v1/memories/search'))} "
            # Double quotes: the shell expands the key (single quotes would send the literal name, a 401).
            '-H "Authorization: Bearer $LOCI_API_KEY" '
            f"-H {shlex.quote('X-Loci-Tenant: ' + scope.tenant.slug)} "
            f"-H 'Content-Type: application/json' -d {shlex.quote(payload)}")


def _request_body(form: dict) -> dict:
    """The playground's form as the API's JSON body, so both go through the same validation."""
    try:
        top_k = int(form["top_k"])
    except ValueError:
        raise SearchError(f"'top_k' must be an integer from 1 to {MAX_TOP_K}, or -1.") from None
    filters = {}
    if form["kb"]:
        filters["kb"] = [form["kb"]]
    if form["document"]:
        filters["document_id"] = [form["document"]]
    for key in ("user_id", "agent_id", "group_id", "run_id"):
        if form.get(key):
            filters[key] = form[key]
    if form.get("metadata"):
        try:
            filters["metadata"] = json.loads(form["metadata"])
        except ValueError:
            raise SearchError("'metadata' must be a JSON object, e.g. {\"category\": \"travel\"}.") from None
    types = ["episode", "atomic_fact"] + (["chunk"] if form["chunks"] else []) + (["summary"] if form.get("summaries") else [])
    return {"query": form["q"], "method": form["method"], "top_k": top_k, "memory_types": types,
            "filters": filters}


def _document_choices(scope, kb_slug: str):
    docs = Document.objects.in_scope(scope).filter(status=Document.Status.READY)
    if kb_slug:
        docs = docs.filter(kb__slug=kb_slug)
    return docs.only("id", "filename")[:DOCUMENT_CHOICES]


def _decorate(response: dict, terms: list[str]) -> dict:
    """Add what the template shows: highlighted HTML, source links and labels, ordered stage scores,
    and `ranked`, facts, episodes and chunks in one list in the API's `rank` order, each with its kind."""
    for episode in response.get("episodes", []):
        _item(episode, episode.get("summary", ""), terms)
        for fact in episode.get("atomic_facts", []):
            _item(fact, fact.get("atomic_fact", ""), terms)
    for fact in response.get("facts", []):
        _item(fact, fact.get("atomic_fact", ""), terms)
    for chunk in response.get("chunks", []):
        _item(chunk, chunk.get("text", ""), terms)
    for other in response.get("agent_memory", []) + response.get("profiles", []):
        _item(other, other.get("text", ""), terms)
    response["count"] = sum(len(response.get(k, [])) for k in LISTS)
    response["ranked"] = ranked(response)
    return response


def _kind(key: str, item: dict) -> str:
    """The label a result shows: its list's, or an agent case's or skill's own."""
    return {"agent_case": "case", "agent_skill": "skill", "summary": "summary"}.get(item.get("memory_type"),
                                                                                  KIND_OF_LIST[key])


def ranked(response: dict) -> list[dict]:
    """Episodes, facts, chunks, agent cases and skills and profile items as one list in the order the API ranks them, each with its kind.

    Items carry `rank` when the search ranked across kinds itself; otherwise they are mixed by score
    (the sort is stable, so equal scores keep the API's order within a kind).
    """
    items = [dict(item, kind=_kind(key, item)) for key in LISTS for item in response.get(key, [])]
    if items and all(isinstance(item.get("rank"), int) for item in items):
        return sorted(items, key=lambda item: item["rank"])
    return sorted(items, key=lambda item: -float(item.get("score") or 0.0))


def _item(item: dict, text: str, terms: list[str]) -> None:
    item["html"] = highlight(text, terms)
    scores = item.get("scores") or {}
    item["why"] = [(name, scores[name], help_text) for name, help_text in STAGES if name in scores]
    trail = item.get("trail") or []
    # The search's own trail (retrieval.search.pipeline): each stage that set or changed the score,
    # in order, so the last row is the number on the card's badge (issue 38).
    item["why"] += [(f"→ {step['stage']}", step["score"], TRAIL_HELP.get(step["stage"], "")) for step in trail]
    shown = item.get("score")
    if not trail and item["why"] and isinstance(shown, (int, float)) and abs(float(item["why"][-1][1]) - float(shown)) > 5e-5:
        # A nested fact has no trail (it is its episode's detail, not ranked): say where its number is from.
        item["why"].append(("shown", shown, "the score on this card: its episode's search calibrated it from the row above"))
    item["via_fact"] = bool(scores.get("via_fact"))
    for source in item.get("sources", []):
        if source.get("document_id"):
            chunk_id = source.get("chunk_id")
            source["url"] = f"/documents/{source['document_id']}/" + (
                f"?chunk={chunk_id}#chunk-{chunk_id}" if chunk_id else "")
            source["where"] = location_label(source)
            # The original at the cited place (a PDF at its page; other types at their chunk). A transcript
            # fact cites its own cue inside its chunk's window of cues: `t` opens the viewer at that cue.
            params = [f"chunk={chunk_id}"] if chunk_id else []
            if source.get("start_time") is not None:
                params.append(f"t={source['start_time']}")
            source["original_url"] = f"/documents/{source['document_id']}/view/" + (
                "?" + "&".join(params) if params else "")
