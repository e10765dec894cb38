"""A throwaway embedded Loci for benchmarks: temp var dir, migrated SQLite, one tenant and KB."""

import atexit
import os
import resource
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

SHARED_DATA = Path(os.environ.get("LOCI_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def cpu_seconds() -> float:
    """This process's CPU time, user and system (every thread's): what a training or benchmark record reports."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup_django(var_dir: str | None = None, *, eager: bool = True) -> Path:
    """Point settings at a fresh var dir (its own Milvus Lite port), set up Django and migrate."""
    var = Path(var_dir or tempfile.mkdtemp(prefix="loci-bench-"))
    os.environ["LOCI_VAR_DIR"] = str(var)
    os.environ.setdefault("MILVUS_LITE_PORT", str(_free_port()))
    os.environ["DJANGO_SETTINGS_MODULE"] = "loci.settings"
    # A benchmark is one caller asking as fast as it can: the per-key request rates would measure themselves.
    os.environ.setdefault("LOCI_RATE_LIMIT_USER", "off")
    os.environ.setdefault("LOCI_RATE_LIMIT_SEARCH", "off")
    os.environ.setdefault("LOCI_SEARCH_CPU_PER_MINUTE", "0")
    if eager:
        os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    atexit.register(_stop_milvus_lite, var / "milvus.db")
    return var


def _stop_milvus_lite(path: Path) -> None:
    """The embedded Milvus Lite server a benchmark started lives on after it; stop it at exit."""
    from retrieval.milvus_lite import stop_server

    stop_server(path)


def make_scope(tenant_slug: str = "bench", kb_slug: str = "bench"):
    from tenants.access import Scope
    from tenants.models import KnowledgeBase, Tenant

    tenant, _ = Tenant.objects.get_or_create(slug=tenant_slug, defaults={"name": tenant_slug})
    kb, _ = KnowledgeBase.objects.get_or_create(tenant=tenant, slug=kb_slug, defaults={"name": kb_slug})
    return Scope(tenant, frozenset([kb.pk]), True, True, "bench"), kb


@contextmanager
def timed(label: str, into: dict):
    start = time.perf_counter()
    yield
    into[label] = into.get(label, 0.0) + time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


# --- conversation benchmarks (bench.locomo, bench.longmemeval): one embedded stack behind the REST API

def conversation_stack(embedding_cache: str | None) -> Path:
    """A throwaway var dir with Django migrated and no LLM; `embedding_cache` (a file) is linked in.

    A warm cache only skips model calls; it never changes a vector."""
    var = Path(tempfile.mkdtemp(prefix="loci-conv-"))
    if embedding_cache:
        Path(embedding_cache).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(Path(embedding_cache).resolve(), var / "embedding-cache.sqlite3")
    os.environ.setdefault("LLM_DISABLED", "1")  # the target is the embedded stack without an LLM
    # On a loaded machine a first query embedding can take longer than a server should wait; a
    # benchmark measures what is found, not the deadline (seen: 504 at load average 26).
    os.environ.setdefault("SEARCH_ENGINE_TIMEOUT_SECONDS", "600")
    setup_django(str(var))
    return var


def close_stack(var: Path, keep: bool, *, stop: bool = True) -> None:
    """Stop the stack's Milvus Lite server (unless not `stop`: another run may be using it; it stops
    itself when unused) and, unless `keep`, remove its var dir (not a linked cache)."""
    import shutil

    from django.conf import settings

    from retrieval.backends import reset_backends
    from retrieval.milvus_lite import stop_server

    reset_backends()
    if stop:
        stop_server(settings.LOCI_VECTOR_INDEX["OPTIONS"]["lite_path"])
    if not keep:
        shutil.rmtree(var, ignore_errors=True)


def cached_query_embedder():
    """The embedder, with its query embedding remembered for the process: every question is embedded
    by the vector search, the hybrid search and the flat dense baseline alike, so two of three calls go."""
    from functools import lru_cache

    from retrieval.embeddings import embedder

    model = embedder()
    model.embed_query = lru_cache(maxsize=None)(model.embed_query)
    return model


def api_client(slug: str = "locomo", name: str = "LoCoMo"):
    """A DRF test client with a write key of the tenant `slug` (made with its English KB if new; a var dir
    reused by bench.longmemeval --reuse has it): the real views, authentication and actions run."""
    from rest_framework.test import APIClient

    from tenants.models import ApiKey, KnowledgeBase, Tenant

    tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults={"name": name})
    KnowledgeBase.objects.get_or_create(tenant=tenant, slug="conversations",
                                        defaults={"name": "Conversations", "language": "en"})
    _, secret = ApiKey.issue(tenant, "bench", can_write=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def call(client, method: str, url: str, body: dict) -> dict:
    response = getattr(client, method)(url, body, format="json")
    if response.status_code != 200:
        raise RuntimeError(f"{method.upper()} {url} answered {response.status_code}: {response.content[:500]!r}")
    return response.json()


MEMORY_COUNTS = ("episodes", "facts", "merged_duplicates", "superseded")


def post_session(client, user_id: str, session_id: str, messages: list[dict], stats: dict) -> None:
    """Post one session's messages (500 a request) and flush it; add the memories made to `stats`.

    A post extracts the MemCells it completes, the flush the rest; `wait`, so that with an LLM they do
    so in the request too (else they answer 202 and a worker extracts)."""
    results = [call(client, "post", "/api/v1/memories",
                    {"user_id": user_id, "session_id": session_id, "messages": messages[at:at + 500], "wait": True})
               for at in range(0, len(messages), 500)]
    results.append(call(client, "post", "/api/v1/memories/flush",
                        {"user_id": user_id, "session_id": session_id, "wait": True}))
    stats["messages"] += len(messages)
    for result in results:
        for key in MEMORY_COUNTS:
            stats[key] += result.get(key, 0)


def search_message_ids(client, query: str, method: str, user_id: str, top_k: int, **extra) -> list[str]:
    body = {"query": query, "method": method, "top_k": top_k, "filters": {"user_id": user_id}, **extra}
    return ranked_message_ids(call(client, "post", "/api/v1/memories/search", body), method)


def ranked_message_ids(response: dict, method: str) -> list[str]:
    """Result items in score order → their cited message ids, in order, without repeats.

    A fact maps to its source messages, an episode to all its MemCell's messages in order, so k
    counts message ids, not items (a 12-turn episode uses 12)."""
    items = []  # (score, position, ids)
    for episode in response.get("episodes", []):
        if method == "hybrid" or not episode.get("scores", {}).get("via_fact"):
            items.append((episode["score"], len(items), _message_ids(episode)))
        if method != "hybrid":  # flat methods nest their fact hits under the parent episode
            items += [(f["score"], len(items) + j, _message_ids(f)) for j, f in enumerate(episode["atomic_facts"])]
    items += [(f["score"], len(items) + j, _message_ids(f)) for j, f in enumerate(response.get("facts", []))]
    items.sort(key=lambda item: (-item[0], item[1]))
    return list(dict.fromkeys(i for _, _, ids in items for i in ids))


def _message_ids(item: dict) -> list[str]:
    return [s["message_id"] for s in item.get("sources", []) if s.get("type") == "message"]


FLAT_BASELINES = ("flat-bm25", "flat-dense", "flat-rrf")


def flat_rankings(ids: list[str], lines: list[str], questions: list[str], top_k: int, embed_query
                  ) -> dict[str, list[list[str]]]:
    """Flat baselines over raw turns (`lines`, one per message id): BM25, dense cosine, their RRF,
    each a list of ranked ids per question. The lines should be the "speaker: text" the boundary
    detector embeds, so the embedding cache serves both."""
    from bench.flat import FlatBM25, dense_top, rrf_merge
    from retrieval.embeddings import embedder

    bm25 = FlatBM25(lines)
    matrix = embedder().embed_documents(lines)
    out = {name: [] for name in FLAT_BASELINES}
    for question in questions:
        sparse = bm25.top(question, top_k)
        dense = dense_top(matrix, embed_query(question), top_k)
        out["flat-bm25"].append([ids[i] for i in sparse])
        out["flat-dense"].append([ids[i] for i in dense])
        out["flat-rrf"].append([ids[i] for i in rrf_merge([sparse, dense], k=60, limit=top_k)])
    return out
