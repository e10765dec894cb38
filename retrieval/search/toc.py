"""The `navigate` method: find the best sections of the documents, then rank the chunks inside them
(issue 39; PageIndex's table-of-contents search, without an LLM).

A child chunk's text rarely repeats the heading it sits under ("Annual leave" over "You get 25 days
a year"), so a question that names the part of a document it wants ("what does the leave policy say
about carry-over?") can miss the chunk by its own words. Navigate reads the table of contents
(memory/toc.py) instead:

1. sections: every section in the caller's scope (tenant, readable KBs, filters.document_id, in the
   database query itself), each scored by BM25F over its title (weighted TITLE_FIELD_WEIGHT), its
   ancestors' titles and its summary (its first sentences), as the share of the query's term weight
   it holds (`title_scores`); beside it, the best chunk hit of the whole scope inside the section
   (dense + BM25 fused as hybrid fuses chunks), so a section whose title says nothing of the
   question still counts by what it holds;
2. descend: the SECTIONS_CONSIDERED best sections (none inside another) have their chunks ranked
   by the same fused score, through the index with the full permission filter (so user metadata and
   every other filter still apply); the SECTIONS_DESCENDED best of those with a chunk left are kept,
   each chunk's score blending its section's, and the answer takes the best chunk of each section in
   turn, then the second of each, and so on.

The constants are set by hand, not fitted; bench/RESULTS.md ("Table of contents") compares the
method with hybrid on section questions. Hybrid stays the default.
"""

import math
from collections import Counter
from dataclasses import replace

from memory.models import Chunk
from memory.toc import Section, parent_rows, sections
from retrieval import results
from retrieval.backends.base import IndexFilter
from retrieval.request import SearchRequest
from retrieval.search.engines import Engines
from retrieval.search.hybrid import fuse
from retrieval.search.scoring import relevance
from retrieval.text import index_terms

# Parent chunks read per search, the newest documents first. Each section's title and summary are
# segmented at query time: 5,000 sections cost ~0.45 CPU-s here, 2,000 about 0.15; a scope with more
# sections searches its newest documents' only (docs/limitations.md).
MAX_SECTION_ROWS = 2_000
RECALLED_CHUNKS = 50  # chunk hits of the whole scope that vote for the sections holding them
SECTIONS_DESCENDED = 3
# Sections whose chunks are asked of the index, best first: the first SECTIONS_DESCENDED with a chunk
# the full filter lets through are descended into (a filter on user metadata, which the section scan
# does not read, may leave the best ones empty).
SECTIONS_CONSIDERED = 5
# A section scoring under this share of the best one is not descended into: its chunks would take a
# place in the first rounds (see `_descend`) that the best section's next chunks deserve more.
MIN_SECTION_SHARE = 0.25
MAX_DESCENT_CHUNKS = 400  # chunks ranked inside the sections considered, shared out: a long section's first 80
# BM25 constants of Robertson & Zaragoza, "The Probabilistic Relevance Framework" (2009): the usual
# defaults. A title word counts three times a summary word (BM25F field weight, set by hand).
BM25_K1, BM25_B = 1.2, 0.75
TITLE_FIELD_WEIGHT = 3.0
TITLE_WEIGHT = 0.5  # a section's score: this much its title match, the rest its best chunk hit
SECTION_WEIGHT = 0.5  # a chunk's score: this much its section's, the rest its own fused score


def search(scope, req: SearchRequest, base: IndexFilter, engines: Engines) -> dict:
    chunk_flt = replace(base, kinds=("chunk",))
    recall = engines.start_both(chunk_flt, RECALLED_CHUNKS)  # answered while the titles are scored
    nodes = sections_in_scope(base)
    titles = title_scores(req.query, nodes)
    hits = fuse(engines, chunk_flt, RECALLED_CHUNKS, (engines.result(recall[0]), engines.result(recall[1])))
    best_hit = _best_hit_per_parent(hits)
    ranked = rank_sections(nodes, titles, best_hit)
    chosen = _distinct(nodes, ranked, SECTIONS_CONSIDERED)
    return {"episodes": [], "facts": [], "chunks": _descend(scope, req, engines, chunk_flt, chosen)}


def sections_in_scope(base: IndexFilter) -> list[Section]:
    """Every section of the documents the filter lets through (tenant, KBs, documents): the
    permission filter is part of the query, never applied to its result."""
    chunks = Chunk.objects.filter(document__kb__tenant_id=base.tenant_id, document__kb_id__in=base.kb_ids)
    if base.document_ids:
        chunks = chunks.filter(document_id__in=base.document_ids)
    return sections(parent_rows(chunks, limit=MAX_SECTION_ROWS))


def title_scores(query: str, nodes: list[Section]) -> dict[int, float]:
    """BM25F of the query over each section's title, ancestors' titles and summary, divided by the
    most a section could score (every query term, saturated): 0..1, by the node's index in `nodes`."""
    wanted = set(index_terms(query))
    if not wanted or not nodes:
        return {}
    memo: dict[str, list[str]] = {}  # titles recur on every subsection's path; a heading's summary is its first child's

    def terms(text: str) -> list[str]:
        if text not in memo:
            memo[text] = index_terms(text)
        return memo[text]

    bags, lengths = [], []
    for node in nodes:
        fields = ((terms(node.title), TITLE_FIELD_WEIGHT), (terms(node.summary), 1.0),
                  *((terms(title), 1.0) for title in node.path[:-1]))
        bag: Counter = Counter()
        for words, weight in fields:
            for term in wanted.intersection(words):
                bag[term] += weight * words.count(term)
        bags.append(bag)
        lengths.append(sum(weight * len(words) for words, weight in fields))
    n = len(nodes)
    mean_length = sum(lengths) / n or 1.0
    df = Counter(t for bag in bags for t in bag)
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in wanted}
    most = sum(idf.values()) * (BM25_K1 + 1)
    scores = {}
    for i, bag in enumerate(bags):
        norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths[i] / mean_length)
        score = sum(idf[t] * bag[t] * (BM25_K1 + 1) / (bag[t] + norm) for t in wanted if t in bag)
        if score > 0:
            scores[i] = min(1.0, score / most)
    return scores


def rank_sections(nodes: list[Section], titles: dict[int, float],
                  best_hit: dict[int, tuple[float, str]]) -> list[tuple[float, int]]:
    """(score, node index), best first: TITLE_WEIGHT × title match + the rest × its best chunk hit.

    Ties go to the deeper section: it names the part of the document more precisely."""
    ranked = []
    for i, node in enumerate(nodes):
        hit = max((best_hit[p][0] for p in node.parent_ids if p in best_hit), default=0.0)
        score = TITLE_WEIGHT * titles.get(i, 0.0) + (1 - TITLE_WEIGHT) * hit
        if score > 0:
            ranked.append((score, i))
    ranked.sort(key=lambda s: (-s[0], -nodes[s[1]].depth, s[1]))
    return [(score, i) for score, i in ranked]


def _best_hit_per_parent(hits) -> dict[int, tuple[float, str]]:
    """The best fused chunk hit under each parent chunk (the chunk hits' parents, one query)."""
    fused = {int(c.id.split(":", 1)[1]): c.score for c in hits}
    best: dict[int, tuple[float, str]] = {}
    for pk, parent_id in Chunk.objects.filter(pk__in=list(fused)).values_list("pk", "parent_id"):
        if parent_id is not None and fused[pk] > best.get(parent_id, (-1.0, ""))[0]:
            best[parent_id] = (fused[pk], f"chunk:{pk}")
    return best


def _distinct(nodes: list[Section], ranked: list[tuple[float, int]], count: int) -> list[tuple[float, Section]]:
    """The best `count` sections, skipping one inside a section already chosen or holding one (they
    share parent chunks: descending into both would rank the same chunks twice)."""
    chosen, taken = [], set()
    for score, i in ranked:
        if len(chosen) == count:
            break
        if taken.intersection(nodes[i].parent_ids):
            continue
        chosen.append((score, nodes[i]))
        taken.update(nodes[i].parent_ids)
    return chosen


def _with_chunks(found: list[tuple[float, int]]) -> set[int]:
    """Of the sections some chunk came back for ((score, number) each), the first SECTIONS_DESCENDED by
    number, down to MIN_SECTION_SHARE of the best of them."""
    numbered = sorted(set(found), key=lambda s: s[1])
    if not numbered:
        return set()
    best = numbered[0][0]
    return {number for score, number in numbered[:SECTIONS_DESCENDED] if score >= MIN_SECTION_SHARE * best}


def _descend(scope, req: SearchRequest, engines: Engines, chunk_flt: IndexFilter,
             chosen: list[tuple[float, Section]]) -> list[dict]:
    """The chosen sections' chunks, each scored SECTION_WEIGHT × its section + the rest × its own fused
    score, in rounds: the best chunk of each section in the sections' order, then the second of each…
    (each section found stands in the first few results, rather than the best section's many chunks
    burying the second section's). A score is capped at the one above it, so `rank` keeps that order."""
    parent_of, per_section = {}, max(1, MAX_DESCENT_CHUNKS // max(1, len(chosen)))
    for _, node in chosen:  # reading order, so a section's first chunks are kept when it is cut
        rows = (Chunk.objects.filter(parent_id__in=node.parent_ids, level=Chunk.Level.CHILD)
                .order_by("ordinal").values_list("pk", "parent_id")[:per_section])
        parent_of.update({f"chunk:{pk}": parent for pk, parent in rows})
    if not parent_of:
        return []
    section_of = {p: (score, number) for number, (score, node) in enumerate(chosen) for p in node.parent_ids}
    fused = fuse(engines, replace(chunk_flt, ids=tuple(parent_of)), len(parent_of))
    kept = _with_chunks([section_of[parent_of[c.id]] for c in fused])
    fused = [c for c in fused if section_of[parent_of[c.id]][1] in kept]
    placed: Counter = Counter()
    rounds = []
    for c in sorted(fused, key=lambda c: c.score, reverse=True):
        section_score, number = section_of[parent_of[c.id]]
        blend = SECTION_WEIGHT * section_score + (1 - SECTION_WEIGHT) * c.score
        rounds.append(((placed[number], number), c.id, blend, {
            "section": round(section_score, 6), "cosine": c.scores.get("cosine", 0.0),
            "bm25": c.scores.get("bm25", 0.0), "fused": c.score}))
        placed[number] += 1
    rounds.sort(key=lambda r: r[0])
    scored, ceiling = [], 1.0
    for _, item_id, blend, scores in rounds[:req.limit]:
        ceiling = min(ceiling, blend)
        scored.append((item_id, ceiling, scores))
    loaded = results.load_chunks(scope, [i for i, _, _ in scored])
    # The blend is scored on the chunks' fused scale, so the chunk map gives it a relevance comparable to hybrid's.
    return [results.chunk_item(loaded[i], relevance("chunk", blend), scores, expand_context=req.expand_context)
            for i, blend, scores in scored if i in loaded]
