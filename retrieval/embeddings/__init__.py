"""The configured embedding providers: `embedder()` is a thin accessor over the backend handler.

    vectors = embedder().embed_documents(texts)   # (n, embedder().dim) float32, unit rows
    query = embedder().embed_query(text)

`embedder()` is the embedder whose vectors the live index build holds, `embedder(build=b)` the one
of build `b` (each build records its alias and its model's identity, retrieval/builds.py; when the
alias is now configured with another model, identity.py decides), so queries are always embedded in
the vector space they search and writes never mix two models in one build. `embedder("next")` is
one alias as configured.
`embedder().name` identifies the vector space and `embedder().dim` its width: the index layer names
collections by dim, so changing the model means a reindex, never mixed vectors or lost data.
"""

from django.core.exceptions import ImproperlyConfigured

from common.backends import embedders
from retrieval import builds
from retrieval.embeddings import identity
from retrieval.embeddings.base import Embedder, EmbeddingError
from retrieval.embeddings.identity import EmbedderMismatch
from retrieval.embeddings.providers import build_embedder, build_provider, configured_embedder

__all__ = ["Embedder", "EmbedderMismatch", "EmbeddingError", "build_embedder", "build_provider", "configured_embedder",
           "embedder", "reset_embedder"]


def embedder(alias: str | None = None, *, build: builds.Build | None = None) -> Embedder:
    """The embedder of `alias` as configured; without one, the embedder whose vectors `build` (by
    default the live build) holds. Built on first use: models load lazily, nothing at import."""
    if alias is not None:
        return embedders.get(alias)
    build = build or builds.current().live
    if build.embedder not in embedders.settings:
        raise ImproperlyConfigured(
            f"index build {build.number} was embedded by the LOCI_EMBEDDERS alias {build.embedder!r} (see "
            "LOCI_INDEX_STATE), which is not configured: configure it, or `manage.py reindex --embedder default`")
    return identity.embedder_for(build)


def reset_embedder() -> None:
    """Forget the built embedders (loaded models stay loaded); the next call builds them again."""
    embedders.reset()
    identity.reset()
