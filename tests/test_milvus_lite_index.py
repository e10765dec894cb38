"""Milvus Lite past its index threshold: searches that must score every picked row still do.

Milvus Lite 2.5.1 brute-forces a collection until 100,000 rows have gone into it, then serves
searches from a growing IVF index that ignores our nprobe (bench/RESULTS.md, session 5). The
id- and parent-filtered searches of hybrid search rely on scoring every row the filter picks;
this checks they still do once the index is on, with the cosines numpy computes.
"""

import numpy as np
import pytest

from retrieval.backends.base import IndexFilter, IndexRow
from tests.index_fixtures import milvus_lite_uri, milvus_vector_index  # noqa: F401  (fixtures)

THRESHOLD = 100_000  # build ratio 0.1 x Milvus Lite's compiled-in 1,000,000 max index rows
# The threshold counts rows, whatever their width: 64 dimensions instead of e5's 384 send a sixth of the
# data for the 100,500 rows (the id-filtered search scores the picked rows with numpy either way).
DIM = 64


@pytest.mark.slow
def test_id_filtered_search_scores_every_picked_row_past_the_index_threshold(milvus_vector_index):
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(THRESHOLD + 500, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for start in range(0, len(vectors), 5000):
        milvus_vector_index.upsert([
            IndexRow(id=f"memory:{i}", tenant_id=1, kb_id=1, kind="atomic_fact", vector=vectors[i].tolist())
            for i in range(start, min(start + 5000, len(vectors)))])
    picked = sorted(rng.choice(len(vectors), 40, replace=False).tolist())
    query = rng.normal(size=DIM).astype(np.float32)
    query /= np.linalg.norm(query)

    hits = milvus_vector_index.search(query.tolist(), IndexFilter(tenant_id=1, kb_ids=(1,),
                                                                  ids=tuple(f"memory:{i}" for i in picked)), top_k=40)

    expected = {f"memory:{i}": float(vectors[i] @ query) for i in picked}
    assert {h.id for h in hits} == set(expected)
    for h in hits:
        assert h.score == pytest.approx(expected[h.id], abs=1e-4)
