"""The centroid index of the late-interaction projection: a codebook per knowledge base, codes per row.

The ColBERT recall channel (retrieval/search/colbert_channel.py) finds a query's nearest messages
among all of a scope's messages, not only among hybrid's candidates. Exact MaxSim over every stored
matrix costs a read of every vector (3.4 ms per LoCoMo conversation, 100x that at 100k messages), so,
as PLAID does, each token of a message's stored matrix (TokenVectors, int8) is replaced by the id of its
nearest centroid (uint8, k ≤ 256), and the channel scores centroids first, exact MaxSim only for the
best few hundred messages. In the prototype 256 centroids per conversation kept 94.1 % of the exhaustive
top 20 in the centroid top 100 (bench/RESULTS.md).

- **Partition**: one knowledge base (of one tenant) and one ColBERT model (TokenCodebook). A KB with
  fewer than MIN_TOKENS message tokens has none: the channel scores it exhaustively, which is cheap there.
- **Fitted** by k-means (faiss, seeded) on a sample of at most SAMPLE_TOKENS of the KB's tokens, at write
  time when a KB first reaches MIN_TOKENS and again whenever it has doubled since (so a KB that grew from
  a few sessions is not described by its first ones; all refits together cost at most twice the last
  one's coding) up to AUTO_REFIT_UP_TO tokens, and by `reindex`. A refit codes every row of the KB again (20k messages: ~10 s).
- **Written** with the vectors (token_vectors._store): a new row gets its tokens' nearest centroids.
- **Checked** by `reconcile` (a KB without the codebook it needs, a codebook of another model or fit,
  rows not coded by their KB's codebook); repaired the same way.
- **Removed** with the rows (the codes are columns of TokenVectors, so every delete path and cascade
  takes them); the codebook goes with its KB or tenant (foreign keys), and with any removal of the KB's
  message rows: its centroids were partly computed from the removed tokens. The next write (or
  `reconcile --repair`, or `reindex`) fits it again on what is left; meanwhile the KB is scored exactly.

Only messages' rows are coded: the channel finds messages (a memory's own vectors are scored by the
late-interaction stage, and chunks are not English-scored at all).
"""

import logging

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Sum

from memory.models import Message
from retrieval.models import TokenCodebook, TokenVectors

log = logging.getLogger(__name__)

MIN_TOKENS = 4096  # ≈ 200 chat turns: exhaustive MaxSim over them is ~1 ms, no index needed
MAX_K = 256  # codes are uint8
TOKENS_PER_CENTROID = 64  # k = tokens / 64 up to 256: 256 at 16k tokens, a LoCoMo conversation's size
SAMPLE_TOKENS = 65536  # faiss's own cap at k = 256 (256 points per centroid)
KMEANS_ITERATIONS = 20
SEED = 1234
CODE_BATCH = 2000  # rows per update batch
# Past this a write never refits (a refit recodes the whole KB in the write path: ~10 s at 20k messages);
# `reindex` does. The sample is then under an eighth of the KB's tokens anyway.
AUTO_REFIT_UP_TO = 8 * SAMPLE_TOKENS


def enabled() -> bool:
    return bool(settings.SEARCH_COLBERT_CHANNEL and settings.SEARCH_LATE_INTERACTION)


def k_for(tokens: int) -> int:
    return int(min(MAX_K, max(16, tokens // TOKENS_PER_CENTROID)))


def codebook_name(model: str, k: int) -> str:
    """The identity codes are read by: the vectors' model and the fit's parameters."""
    return f"{model}|kmeans-k{k}-s{SEED}-i{KMEANS_ITERATIONS}"


def centroids_of(book: TokenCodebook) -> np.ndarray:
    return np.frombuffer(bytes(book.centroids), dtype=np.float32).reshape(book.k, -1)


def assign(stored: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Each stored (int8) token's nearest centroid by inner product (the unit vectors' cosine)."""
    return np.argmax(stored.astype(np.float32) @ centroids.T, axis=1).astype(np.uint8)


def _message_rows(kb_id: int, model: str):
    return TokenVectors.objects.filter(message__kb_id=kb_id, model=model)


def kb_tokens(kb_id: int, model: str) -> int:
    return _message_rows(kb_id, model).aggregate(n=Sum("tokens"))["n"] or 0


def current(kb_id: int, model: str) -> TokenCodebook | None:
    return TokenCodebook.objects.filter(kb_id=kb_id, model=model).first()


# --- fitting and coding

def fit(tenant_id: int, kb_id: int, model: str) -> TokenCodebook | None:
    """Fit (or refit) the KB's codebook and code all its rows; drop it when the KB is too small."""
    import faiss

    from retrieval.runtimes.colbert import dequantise

    rows = list(_message_rows(kb_id, model).values_list("pk", "tokens"))
    total = sum(t for _, t in rows)
    if total < MIN_TOKENS:
        TokenCodebook.objects.filter(kb_id=kb_id, model=model).delete()
        return None
    k = k_for(total)
    rng = np.random.default_rng(SEED)
    order = rng.permutation(len(rows))
    picked, n = [], 0
    for i in order:  # whole rows at random up to the sample size (the tokens of a row are alike)
        picked.append(rows[i][0])
        n += rows[i][1]
        if n >= SAMPLE_TOKENS:
            break
    sample = dequantise(np.concatenate([stored_matrix(tokens, data) for tokens, data in
                                        TokenVectors.objects.filter(pk__in=picked).values_list("tokens", "data")]))
    kmeans = faiss.Kmeans(sample.shape[1], k, niter=KMEANS_ITERATIONS, seed=SEED, spherical=True,
                          max_points_per_centroid=SAMPLE_TOKENS // k + 1, verbose=False)
    kmeans.train(np.ascontiguousarray(sample))
    centroids = np.ascontiguousarray(kmeans.centroids, dtype=np.float32)
    fields = {"tenant_id": tenant_id, "name": codebook_name(model, k), "k": k, "fitted_tokens": total,
              "coded_tokens": total, "centroids": centroids.tobytes()}
    with transaction.atomic():  # a concurrent fit of the same KB waits here, then replaces this one
        book = TokenCodebook.objects.select_for_update().filter(kb_id=kb_id, model=model).first()
        if book is None:
            book = TokenCodebook.objects.create(kb_id=kb_id, model=model, generation=1, **fields)
        else:
            TokenCodebook.objects.filter(pk=book.pk).update(generation=F("generation") + 1, **fields)
            book.refresh_from_db()
    code(book, _message_rows(kb_id, model).values_list("pk", flat=True))
    return book


def stored_matrix(tokens: int, data) -> np.ndarray:
    """A TokenVectors row's int8 matrix (`tokens` rows) from its stored bytes."""
    return np.frombuffer(bytes(data), dtype=np.int8).reshape(tokens, -1)


def code(book: TokenCodebook, pks) -> int:
    """Code these rows by `book` (their nearest centroids), in batches; bumps its generation. Returns
    how many tokens it coded."""
    centroids = centroids_of(book)
    pks = list(pks)
    tokens = 0
    for start in range(0, len(pks), CODE_BATCH):
        batch = list(TokenVectors.objects.filter(pk__in=pks[start:start + CODE_BATCH]).only("pk", "tokens", "data"))
        for row in batch:
            row.codes = assign(stored_matrix(row.tokens, row.data), centroids).tobytes()
            row.codebook_id = book.pk
            tokens += row.tokens
        TokenVectors.objects.bulk_update(batch, ["codes", "codebook"])
    bump([book.kb_id])
    return tokens


def bump(kb_ids) -> None:
    """A partition changed: processes' cached copies of it are reloaded on their next search."""
    TokenCodebook.objects.filter(kb_id__in=list(kb_ids)).update(generation=F("generation") + 1)


def written(message_pks, model: str) -> None:
    """After new message rows were stored: code them, or fit the KB's codebook when it is due."""
    if not enabled() or not message_pks:
        return
    by_kb: dict[tuple[int, int], list[int]] = {}
    for pk, tenant_id, kb_id in Message.objects.filter(pk__in=list(message_pks)).values_list("pk", "tenant_id", "kb_id"):
        by_kb.setdefault((tenant_id, kb_id), []).append(pk)
    for (tenant_id, kb_id), pks in by_kb.items():
        book = current(kb_id, model)
        # A refit is due when the KB has doubled since the fit: counted on the codebook as rows are coded
        # (summing the KB's tokens took 41 ms at 20k messages, on every write batch). Removals are not
        # subtracted: a KB that lost rows is refit a little early.
        if book is not None and (book.coded_tokens < 2 * book.fitted_tokens or book.fitted_tokens >= AUTO_REFIT_UP_TO):
            added = code(book, TokenVectors.objects.filter(message_id__in=pks, model=model).values_list("pk", flat=True))
            TokenCodebook.objects.filter(pk=book.pk).update(coded_tokens=F("coded_tokens") + added)
        elif book is not None or kb_tokens(kb_id, model) >= MIN_TOKENS:  # a small KB's sum is cheap
            fit(tenant_id, kb_id, model)


# --- removal, reindex and reconcile

def removed(tenant_id: int, kb_ids) -> None:
    """After message rows of these KBs were deleted (a user's or a session's removal): their codebooks
    go. Centroids are means of the KB's tokens, the removed user's among them; a deletion must leave
    nothing computed from them. The KB is scored exactly until the next write or `reconcile --repair`
    fits it again on what is left (or `reindex`)."""
    TokenCodebook.objects.filter(tenant_id=tenant_id, kb_id__in=list(kb_ids)).delete()


def refit(tenant, model: str) -> int:
    """`reindex`: every KB of the tenant fitted anew and coded (or left without one when small)."""
    if not enabled():
        return 0
    fitted = 0
    for kb_id in tenant.knowledge_bases.values_list("pk", flat=True):
        fitted += fit(tenant.pk, kb_id, model) is not None
    TokenCodebook.objects.filter(tenant=tenant).exclude(model=model).delete()
    return fitted


def reconcile(tenant, model: str, *, repair: bool) -> dict:
    """KBs lacking the codebook they need or holding one of another model or fit; rows of a coded KB
    not coded by its codebook. With repair: fitted, coded, dropped."""
    if not enabled():
        return {"enabled": False}
    report = {"missing_codebooks": 0, "stale_codebooks": 0, "uncoded_rows": 0}
    stale_books = TokenCodebook.objects.filter(tenant=tenant).exclude(model=model)
    report["stale_codebooks"] += stale_books.count()
    if repair:
        stale_books.delete()
    for kb_id in tenant.knowledge_bases.values_list("pk", flat=True):
        tokens = kb_tokens(kb_id, model)
        book = current(kb_id, model)
        if book is None or book.name != codebook_name(model, book.k) or tokens < MIN_TOKENS:
            due = tokens >= MIN_TOKENS
            report["missing_codebooks" if book is None else "stale_codebooks"] += int(due or book is not None)
            if repair and (due or book is not None):
                fit(tenant.pk, kb_id, model)
            continue
        uncoded = _message_rows(kb_id, model).filter(Q(codes__isnull=True) | ~Q(codebook=book))
        pks = list(uncoded.values_list("pk", flat=True))
        report["uncoded_rows"] += len(pks)
        if repair and pks:
            code(book, pks)
    report["repaired"] = bool(repair and any(report.values()))
    return report
