"""The configured embedding provider: `embedder()` builds it once per process from settings.

    vectors = embedder().embed_documents(texts)   # (n, embedder().dim) float32, unit rows
    query = embedder().embed_query(text)

`embedder().name` identifies the vector space and `embedder().dim` its width: the index layer names
collections by dim, so changing LOCI_EMBEDDER means a reindex, never mixed vectors or lost data.
"""

import threading

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from retrieval.embeddings.base import Embedder, EmbeddingError

__all__ = ["Embedder", "EmbeddingError", "build_embedder", "build_provider", "embedder", "reset_embedder"]

_BATCH_SIZE = 64
_FAILOVER_COOLDOWN_SECONDS = 30.0

_lock = threading.Lock()
_built: tuple[tuple, Embedder] | None = None


def build_provider(kind: str, *, max_retries: int = 1) -> Embedder:
    """One uncached provider by its LOCI_EMBEDDER name: "e5-small-onnx", "e5-small", "use" or "openai".

    `max_retries` is the remote client's own retry count (local models ignore it).
    """
    threads = int(getattr(settings, "EMBEDDING_THREADS", 0))
    if kind == "e5-small":
        from retrieval.embeddings.e5 import E5SmallEmbedder

        return E5SmallEmbedder(threads=threads, batch_size=_BATCH_SIZE)
    if kind == "e5-small-onnx":
        from retrieval.embeddings.e5_onnx import E5SmallOnnxEmbedder

        return E5SmallOnnxEmbedder(var_dir=settings.VAR_DIR, threads=threads)
    if kind == "use":
        from retrieval.embeddings.use import UseEmbedder

        return UseEmbedder(threads=threads, batch_size=_BATCH_SIZE)
    if kind == "openai":
        from retrieval.embeddings.openai_compat import OpenAICompatEmbedder

        if not settings.EMBEDDING_MODEL:
            raise ImproperlyConfigured("LOCI_EMBEDDER=openai needs EMBEDDING_MODEL (and usually EMBEDDING_BASE_URL)")
        return OpenAICompatEmbedder(
            base_url=settings.EMBEDDING_BASE_URL,
            api_key=settings.EMBEDDING_API_KEY,
            model=settings.EMBEDDING_MODEL,
            dim=settings.EMBEDDING_DIM,
            timeout=float(getattr(settings, "EMBEDDING_TIMEOUT", 30.0)),
            batch_size=_BATCH_SIZE,
            query_prefix=getattr(settings, "EMBEDDING_QUERY_PREFIX", ""),
            document_prefix=getattr(settings, "EMBEDDING_DOCUMENT_PREFIX", ""),
            max_retries=max_retries,
        )
    raise ImproperlyConfigured(f"unknown embedder {kind!r}; expected e5-small-onnx, e5-small, use or openai")


def build_embedder(primary: str | None = None, fallback: str | None = None, *, cache: bool | None = None) -> Embedder:
    """The primary provider (settings.LOCI_EMBEDDER), each provider behind the disk cache, with failover."""
    primary = primary or settings.LOCI_EMBEDDER
    fallback = settings.LOCI_EMBEDDER_FALLBACK if fallback is None else fallback
    cache = bool(getattr(settings, "EMBEDDING_CACHE", True)) if cache is None else cache
    if fallback == primary:
        fallback = ""

    def wrap(provider: Embedder) -> Embedder:
        if not cache:
            return provider
        from retrieval.embeddings.cache import CachedEmbedder, EmbeddingCache

        return CachedEmbedder(provider, EmbeddingCache(settings.VAR_DIR / "embedding-cache.sqlite3"))

    # With a fallback at hand, failing over at once beats waiting out a retry of a sick endpoint.
    built = wrap(build_provider(primary, max_retries=0 if fallback else 1))
    if fallback:
        from retrieval.embeddings.failover import FailoverEmbedder

        built = FailoverEmbedder(built, wrap(build_provider(fallback)), cooldown=_FAILOVER_COOLDOWN_SECONDS)
    return built


def _settings_key() -> tuple:
    names = (
        "LOCI_EMBEDDER", "LOCI_EMBEDDER_FALLBACK", "EMBEDDING_BASE_URL", "EMBEDDING_API_KEY", "EMBEDDING_MODEL",
        "EMBEDDING_DIM", "EMBEDDING_TIMEOUT", "EMBEDDING_QUERY_PREFIX", "EMBEDDING_DOCUMENT_PREFIX",
        "EMBEDDING_THREADS", "EMBEDDING_CACHE", "VAR_DIR",
    )
    return tuple(str(getattr(settings, name, None)) for name in names)


def embedder() -> Embedder:
    """The process's configured embedder, built on first use (models load lazily, nothing at import)."""
    global _built
    key = _settings_key()
    with _lock:
        # Rebuilt only when the settings it came from change (tests); models stay loaded regardless.
        if _built is None or _built[0] != key:
            _built = (key, build_embedder())
        return _built[1]


def reset_embedder() -> None:
    global _built
    with _lock:
        _built = None
