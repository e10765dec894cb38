"""An approximate index over one large partition of the embedded vector index (sqlite_vectors.py).

A partition past a row threshold is searched through a faiss inverted file (IVF: 4√n lists of rows
around k-means centroids, each row held as 8-bit codes), not by scanning every row: a search reads
a share of the lists (PROBE_SHARE, 10 %: the lists whose centroids are nearest the query). Its ids are the
partition's slots, so the filter a search computes over the partition's rows (status, scope, ids,
deletes: everything `_View.select` evaluates) goes into the IVF's scan as an `IDSelectorBitmap`; a
dead or filtered-out slot is never returned. The IVF only proposes candidates: each is rescored
exactly against the partition's float32 rows, so the scores a search returns are exact inner
products (mRAG's rescoring by ids compares them with exact ones) and a row rewritten since it was
added (its stale code stays in the IVF) is scored by what it holds now.

Kept current without rebuilding: the partition logs the slots each catch-up writes, and a search
adds those rows (the few since the last search) before it scans. The IVF is built the first time a
large partition is searched, in a background thread (searches scan exactly until it is ready); it
is built again, in the same way, when the partition has grown four-fold since its lists were
trained, or when compaction renumbers the slots.
"""

import logging
import threading

import numpy as np

logging.getLogger("faiss.loader").setLevel(logging.WARNING)  # which SIMD build it tries is no news
import faiss  # noqa: E402  (after quieting its loader's log)

GROWTH = 4  # retrain once the partition holds this many times the rows the lists were trained on
SAMPLE_PER_LIST = 40  # k-means training rows per list (faiss asks for at least 39)
LISTS_PER_ROOT = 4  # 4√n lists: at the same share of rows read, finer lists find more of the true top
# 20 than √n (real e5 vectors, real questions: 0.92 against 0.80 reading 6 %; bench/RESULTS.md)
KMEANS_ITERATIONS = 10  # faiss's default 25 costs 2.5x the training for lists barely better placed


class ReadWriteLock:
    """Many searches at once, or one writer (an add): faiss's inverted lists are not safe to search
    while rows are appended to them."""

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False

    def acquire_read(self):
        with self._cond:
            while self._writing:
                self._cond.wait()
            self._readers += 1

    def release_read(self):
        with self._cond:
            self._readers -= 1
            if not self._readers:
                self._cond.notify_all()

    def acquire_write(self):
        with self._cond:
            while self._writing or self._readers:
                self._cond.wait()
            self._writing = True

    def release_write(self):
        with self._cond:
            self._writing = False
            self._cond.notify_all()


class Coarse:
    """One partition's IVF (lists of 8-bit row codes, ids = slots); `synced` is the position in the
    partition's write log up to which its rows are in."""

    def __init__(self, dim: int, trained_on: int, index, mean: np.ndarray):
        self.dim, self.trained_on, self.index, self.mean = dim, trained_on, index, mean
        self.nlist = index.nlist
        self.synced = 0
        self.rw = ReadWriteLock()

    @classmethod
    def build(cls, vectors: np.ndarray, seed: int = 0) -> "Coarse":
        """Lists trained on a sample of `vectors` (unit rows; slot i is row i), then every row added."""
        n, dim = vectors.shape
        nlist = max(1, min(n, int(LISTS_PER_ROOT * np.sqrt(n))))  # a tiny partition (tests): a list a row at most
        rng = np.random.default_rng(seed)
        sample = np.ascontiguousarray(
            vectors[np.sort(rng.choice(n, size=min(n, SAMPLE_PER_LIST * nlist), replace=False))]
        )
        # Rows are held less their mean: e5's vectors share a large common direction, and lists of
        # the centred rows are found more surely (recall 0.94 against 0.91 reading 10 % of the
        # lists, bench/RESULTS.md). A query's inner product with a centred row differs from its
        # product with the row by the same amount for every row, so the order is unchanged.
        mean = sample.mean(axis=0).astype(np.float32)
        sample = sample - mean
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFScalarQuantizer(
            quantizer, dim, nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
        )
        index.cp.seed = seed
        index.cp.niter = KMEANS_ITERATIONS
        index.cp.min_points_per_centroid = 1  # a small partition (tests) trains quietly on what it has
        index.train(sample)
        index.own_fields = True
        quantizer.this.disown()  # the IVF frees its quantizer
        coarse = cls(dim, n, index, mean)
        for start in range(0, n, 50_000):  # in blocks: no second copy of a million rows at once
            stop = min(n, start + 50_000)
            coarse._add(np.ascontiguousarray(vectors[start:stop]), np.arange(start, stop, dtype=np.int64))
        return coarse

    def _add(self, vectors: np.ndarray, slots: np.ndarray) -> None:
        self.index.add_with_ids(np.ascontiguousarray(vectors - self.mean, dtype=np.float32), slots)

    def add(self, vectors: np.ndarray, slots: np.ndarray) -> None:
        """Rows written since the last add (a rewritten slot's old code stays: rescoring is exact)."""
        self.rw.acquire_write()
        try:
            self._add(np.ascontiguousarray(vectors, dtype=np.float32), np.asarray(slots, dtype=np.int64))
        finally:
            self.rw.release_write()

    def candidates(self, queries: np.ndarray, mask: np.ndarray, passing: int, k: int, probe_share: float) -> np.ndarray:
        """Candidate slots (k per query, -1 pads) among those `mask` lets through, from
        `probe_share` of the lists. The fewer rows pass, the more lists are read (the share divided
        by the share of rows passing), so about as many passing rows are read whatever the filter;
        a row failing the filter costs a bit test, not a distance."""
        passes = passing / max(1, len(mask))
        probe = int(min(self.nlist, max(1, round(self.nlist * probe_share / max(passes, 1e-6)))))
        bits = np.packbits(mask, bitorder="little")  # referenced until the search returns
        selector = faiss.IDSelectorBitmap(len(bits), faiss.swig_ptr(bits))
        params = faiss.SearchParametersIVF(sel=selector, nprobe=probe)
        self.rw.acquire_read()
        try:
            _, slots = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k, params=params)
        finally:
            self.rw.release_read()
        return slots

    def bytes_per_row(self) -> float:
        """Code + id per row, as faiss holds them (the centroids are extra: nlist × dim floats)."""
        return self.index.code_size + 8
