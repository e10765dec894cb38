"""Every pluggable backend behind one handler per kind, the way Django holds CACHES and DATABASES.

A kind's setting names its aliases, each `{"BACKEND": dotted path, "OPTIONS": {...}}`, with a
`default` alias; one entry on its own (`{"BACKEND": ..., "OPTIONS": ...}`) is the `default` alias:

    LOCI_VECTOR_INDEX  = {"BACKEND": "retrieval.backends.milvus.MilvusVectorIndex", "OPTIONS": {...}}
    LOCI_EMBEDDERS     = {"default": {...}, "next": {"BACKEND": ..., "OPTIONS": {"provider": "use"}}}

`BACKEND` is a class or factory called with the OPTIONS dict. The handler builds an alias on first
use; an index alias can also be built for a numbered build of the projection (a namespace of its
own, see retrieval/builds.py). A backend that declares `thread_safe = True` is built once per
process and shared by every thread; any other is built once per thread, as Django's handler does
(`Local(thread_critical=False)`), because we cannot know it is safe. Changed settings (tests) close
and forget a kind's backends; `close_all()` closes every kind's.
"""

import threading

from asgiref.local import Local
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.connection import BaseConnectionHandler
from django.utils.functional import cached_property
from django.utils.module_loading import import_string

DEFAULT_ALIAS = "default"
_MISSING = object()


class BackendDoesNotExist(ImproperlyConfigured):
    """No such alias in the kind's setting."""


class BackendHandler(BaseConnectionHandler):
    """The aliases of one kind of backend, built lazily from their `BACKEND` and `OPTIONS`."""

    exception_class = BackendDoesNotExist

    def __init__(self, kind: str, settings_name: str, *, reads=(), thread_safe: bool = False):
        super().__init__()
        self.kind = kind
        self.settings_name = settings_name
        # Flat settings the default entries read when they are built (LOCI_EMBEDDER, RERANK_MODEL...):
        # a change to one of them must rebuild the kind just as a change to its own setting does.
        self.reads = frozenset(reads)
        # What a backend that does not say is taken to be; only kinds whose every possible backend is
        # known to be thread-safe (the LLM kind: an openai.OpenAI client) may default to True.
        self.thread_safe = thread_safe
        self._shared: dict[str, object] = {}
        self._keys: set[str] = set()  # every key built in some thread, to find this thread's ones
        self._lock = threading.Lock()

    # --- settings
    def configure_settings(self, settings):
        if settings is None:
            settings = getattr(django_settings, self.settings_name, None)
        if isinstance(settings, dict) and "BACKEND" in settings:
            settings = {DEFAULT_ALIAS: settings}
        if not isinstance(settings, dict) or DEFAULT_ALIAS not in settings:
            raise ImproperlyConfigured(
                f"{self.settings_name} must be a dict with a BACKEND dotted path, or a dict of aliases with a "
                f"'{DEFAULT_ALIAS}' alias.")
        for alias, conf in settings.items():
            where = f"{self.settings_name}[{alias!r}]" if len(settings) > 1 else self.settings_name
            if not isinstance(conf, dict) or not isinstance(conf.get("BACKEND"), str):
                raise ImproperlyConfigured(f"{where} must be a dict with a BACKEND dotted path.")
            if not isinstance(conf.get("OPTIONS", {}), dict):
                raise ImproperlyConfigured(f"{where}['OPTIONS'] must be a dict.")
        return settings

    @cached_property
    def settings(self):
        # Not the parent's: that one caches the configured value in _settings too, so a reset could
        # not read the setting again.
        return self.configure_settings(self._settings)

    # --- building
    def backend(self, alias: str):
        """The class or factory an alias names."""
        if alias not in self.settings:
            raise self.exception_class(f"{self.settings_name} has no alias {alias!r}.")
        path = self.settings[alias]["BACKEND"]
        try:
            return import_string(path)
        except ImportError as exc:
            raise ImproperlyConfigured(f"{self.settings_name}: cannot import {path!r}: {exc}") from exc

    def options(self, alias: str, build: int = 0) -> dict:
        """The OPTIONS an alias is built with; for a build > 0, the backend's namespace for that build."""
        options = dict(self.settings[alias].get("OPTIONS", {})) if alias in self.settings else {}
        if build:
            backend = self.backend(alias)
            for_build = getattr(backend, "build_options", None)
            if for_build is None:
                raise ImproperlyConfigured(f"{self.settings_name}[{alias!r}]: {backend.__name__} keeps no builds "
                                           "(it has no build_options), so it cannot be rebuilt online.")
            options = for_build(options, int(build))
        return options

    def create_connection(self, alias: str, build: int = 0):
        return self.backend(alias)(self.options(alias, build))

    def get(self, alias: str = DEFAULT_ALIAS, *, build: int = 0):
        """The backend of `alias` (of one build of it, for an index), built on first use."""
        key = alias if not build else f"{alias}@b{int(build)}"
        found = self._shared.get(key, _MISSING)
        if found is _MISSING:
            found = getattr(self._connections, key, _MISSING)
        if found is not _MISSING:
            return found
        with self._lock:  # one build per process of a shared backend (a Milvus client, a loaded model)
            found = self._shared.get(key, _MISSING)
            if found is not _MISSING:
                return found
            built = self.create_connection(alias, build)
            if getattr(built, "thread_safe", self.thread_safe):
                self._shared[key] = built
            else:
                setattr(self._connections, key, built)
                self._keys.add(key)
        return built

    def __getitem__(self, alias: str):
        return self.get(alias)

    def all(self, initialized_only: bool = False):
        if not initialized_only:
            return [self.get(alias) for alias in self]
        return [*self._shared.values(), *self._this_threads()]

    def _this_threads(self) -> list:
        found = (getattr(self._connections, key, _MISSING) for key in list(self._keys))
        return [one for one in found if one is not _MISSING]

    # --- closing
    def close_all(self) -> None:
        """Close what this handler built: every shared backend and this thread's own ones (other
        threads' go with the dropped thread-local, garbage-collected)."""
        with self._lock:
            built = [*self._shared.values(), *self._this_threads()]
            self._shared.clear()
            self._connections = Local(self.thread_critical)
            self._keys.clear()
        for one in built:
            close = getattr(one, "close", None)
            if close is not None:
                close()

    def reset(self) -> None:
        """Close and forget every backend and the settings read; the next call reads them again."""
        self.close_all()
        self.__dict__.pop("settings", None)


def backend_handlers() -> list[BackendHandler]:
    return list(_HANDLERS)


_HANDLERS: list[BackendHandler] = []


def register(handler: BackendHandler) -> BackendHandler:
    _HANDLERS.append(handler)
    return handler


def close_all() -> None:
    """Close every kind's backends (a process that is about to exit, a test that is done)."""
    for handler in _HANDLERS:
        handler.close_all()


@receiver(setting_changed)
def _reset_on_setting_change(*, setting, **kwargs):
    for handler in _HANDLERS:
        if setting == handler.settings_name or setting in handler.reads:
            handler.reset()


# The five kinds. Each module that serves one (retrieval.backends, retrieval.embeddings,
# retrieval.runtimes.rerankers, common.llm) keeps its accessor (`vector_index()`, `embedder()`...) as a thin
# wrapper over its handler here.
vector_indexes = register(BackendHandler("vector index", "LOCI_VECTOR_INDEX"))
keyword_indexes = register(BackendHandler("keyword index", "LOCI_KEYWORD_INDEX"))
embedders = register(BackendHandler("embedder", "LOCI_EMBEDDERS", reads=(
    "LOCI_EMBEDDER", "LOCI_EMBEDDER_FALLBACK", "EMBEDDING_BASE_URL", "EMBEDDING_API_KEY", "EMBEDDING_MODEL",
    "EMBEDDING_DIM", "EMBEDDING_TIMEOUT", "EMBEDDING_QUERY_PREFIX", "EMBEDDING_DOCUMENT_PREFIX",
    "EMBEDDING_THREADS", "EMBEDDING_PRECISION", "EMBEDDING_CACHE", "EMBEDDING_CACHE_PATH", "VAR_DIR", "LOCI_MODELS_DIR")))
rerankers = register(BackendHandler("reranker", "LOCI_RERANKERS", reads=(
    "RERANK_BASE_URL", "RERANK_API_KEY", "RERANK_MODEL", "RERANK_FALLBACK", "RERANK_LOCAL", "RERANK_TIMEOUT",
    "LLM_ENABLED", "RERANK_MULTILINGUAL", "RERANK_MULTILINGUAL_PRECISION", "LOCI_MODELS_DIR")))
# openai.OpenAI is documented thread-safe (one httpx.Client with a connection pool), so a client
# is shared by every thread; an alias whose BACKEND returns something else can say otherwise.
llm_clients = register(BackendHandler("LLM client", "LOCI_LLM_CLIENTS", thread_safe=True, reads=(
    "OPENAI_BASE_URL", "OPENAI_API_KEY", "LLM_TIMEOUT", "LLM_ENABLED")))
