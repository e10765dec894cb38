"""Building embedders from settings: one provider by name, behind the disk cache, with failover.

`configured_embedder` is the BACKEND of the default LOCI_EMBEDDERS alias; retrieval.embeddings
re-exports all three.
"""

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from common.metrics import metered_embedder
from retrieval.embeddings.base import Embedder
from retrieval.embeddings.cache import CachedEmbedder, EmbeddingCache
from retrieval.embeddings.failover import FailoverEmbedder

_BATCH_SIZE = 64
_FAILOVER_COOLDOWN_SECONDS = 30.0


def build_provider(kind: str, *, max_retries: int = 1, options: dict | None = None) -> Embedder:
    """One uncached provider by its LOCI_EMBEDDER name: "e5-small-onnx", "e5-small", "use" or "openai".

    `max_retries` is the remote client's own retry count (local models ignore it). `options`
    (an alias's OPTIONS) override the flat EMBEDDING_* settings, by the same names in lower case
    without the prefix: base_url, api_key, model, dim, timeout, query_prefix, document_prefix, threads, precision.
    """
    options = options or {}

    def setting(name, default=None):
        return options.get(name.lower(), getattr(settings, f"EMBEDDING_{name}", default))

    threads = int(setting("THREADS", 0))
    if kind == "e5-small":
        from retrieval.embeddings.e5 import E5SmallEmbedder

        return E5SmallEmbedder(threads=threads, batch_size=_BATCH_SIZE)
    if kind == "e5-small-onnx":
        from retrieval.embeddings.e5_onnx import E5SmallOnnxEmbedder

        return E5SmallOnnxEmbedder(var_dir=settings.VAR_DIR, models_dir=settings.LOCI_MODELS_DIR, threads=threads,
                                   precision=setting("PRECISION", "int8"))
    if kind == "use":
        from retrieval.embeddings.use import UseEmbedder

        return UseEmbedder(threads=threads, batch_size=_BATCH_SIZE)
    if kind == "openai":
        from retrieval.embeddings.openai_compat import OpenAICompatEmbedder

        if not setting("MODEL"):
            raise ImproperlyConfigured("LOCI_EMBEDDER=openai needs EMBEDDING_MODEL (and usually EMBEDDING_BASE_URL)")
        return OpenAICompatEmbedder(
            base_url=setting("BASE_URL"),
            api_key=setting("API_KEY"),
            model=setting("MODEL"),
            dim=setting("DIM"),
            timeout=float(setting("TIMEOUT", 30.0)),
            batch_size=_BATCH_SIZE,
            query_prefix=setting("QUERY_PREFIX", ""),
            document_prefix=setting("DOCUMENT_PREFIX", ""),
            max_retries=max_retries,
        )
    raise ImproperlyConfigured(f"unknown embedder {kind!r}; expected e5-small-onnx, e5-small, use or openai")


def build_embedder(primary: str | None = None, fallback: str | None = None, *, cache: bool | None = None,
                   options: dict | None = None) -> Embedder:
    """The primary provider (settings.LOCI_EMBEDDER), each provider behind the disk cache, with failover."""
    primary = primary or settings.LOCI_EMBEDDER
    fallback = settings.LOCI_EMBEDDER_FALLBACK if fallback is None else fallback
    cache = bool(getattr(settings, "EMBEDDING_CACHE", True)) if cache is None else cache
    if fallback == primary:
        fallback = ""

    def wrap(provider: Embedder) -> Embedder:
        provider = metered_embedder(provider)  # under the cache: counts the model's work, not lookups
        if not cache:
            return provider
        return CachedEmbedder(provider, EmbeddingCache(settings.EMBEDDING_CACHE_PATH))

    # With a fallback at hand, failing over at once beats waiting out a retry of a sick endpoint.
    built = wrap(build_provider(primary, max_retries=0 if fallback else 1, options=options))
    if fallback:
        built = FailoverEmbedder(built, wrap(build_provider(fallback, options=options)),
                                 cooldown=_FAILOVER_COOLDOWN_SECONDS)
    return built


def configured_embedder(options: dict) -> Embedder:
    """The BACKEND of the default LOCI_EMBEDDERS alias: `provider` (else LOCI_EMBEDDER), `fallback`
    (else LOCI_EMBEDDER_FALLBACK), `cache` (else EMBEDDING_CACHE) and the EMBEDDING_* settings, each
    overridable in OPTIONS, so an empty OPTIONS is exactly what the environment says."""
    options = dict(options)
    return build_embedder(options.pop("provider", None), options.pop("fallback", None),
                          cache=options.pop("cache", None), options=options)
