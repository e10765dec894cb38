"""Index fixtures for any test module: `from tests.index_fixtures import milvus_lite_uri, ...`.

- `milvus_lite_uri` (session): one Milvus Lite server on a free port in a temporary directory.
- `sqlite_keyword_index`, `tantivy_keyword_index`, `sqlite_vector_index`, `milvus_vector_index`: a fresh backend per test (own
  file / own prefix).
- `milvus_server` (session): (uri, token, version) of a Milvus server: MILVUS_URI (and MILVUS_TOKEN)
  when set, else a Milvus 2.3.5 standalone from the `milvus` package (the `test` extra) started once
  per session on free ports in a temporary directory and stopped at its end; skipped without either.
- `server_milvus_vector_index`: a fresh backend per test on that server, HNSW; `server_milvus_index`
  builds one with other options.
- `opensearch_keyword_index`: only when OPENSEARCH_URL is set, skipped otherwise.
- `lite_vector_settings`: points settings.LOCI_VECTOR_INDEX at the session server with a per-test
  collection prefix, so code calling `vector_index()` never starts a server over var/.
- `hash_vector`, `make_row`, `reference_match`: deterministic vectors, rows, and the filter
  semantics written out in plain Python for comparing backends against.
"""

import fcntl
import hashlib
import json
import math
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest

from retrieval.backends.base import IndexFilter, IndexRow
from retrieval.text import tokenize

DIM = 64


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """`n` distinct ports free now: each socket stays bound until all are chosen, so none repeats."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def hash_vector(text: str, dim: int = DIM) -> list[float]:
    """A unit bag-of-terms vector: texts sharing terms are similar, identical texts score 1.0."""
    vec = [0.0] * dim
    for term in tokenize(text) or [text]:
        digest = hashlib.blake2b(term.encode(), digest_size=8).digest()
        vec[digest[0] % dim] += 1.0 if digest[1] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vec)) or 1.0
    if not any(vec):
        vec[0], norm = 1.0, 1.0
    return [x / norm for x in vec]


def make_row(id: str, text: str, *, tenant_id: int = 1, kb_id: int = 1, kind: str = "chunk", dim: int = DIM,
             **fields) -> IndexRow:
    """An IndexRow whose vector is hash_vector(text)."""
    return IndexRow(id=id, tenant_id=tenant_id, kb_id=kb_id, kind=kind, text=text,
                    vector=fields.pop("vector", None) or hash_vector(text, dim), **fields)


def reference_match(row: IndexRow, flt: IndexFilter) -> bool:
    """IndexFilter semantics in plain Python: every set field narrows, empty tuples do not (kb_ids does).

    Written from the documented semantics (retrieval/backends/base.py's docstrings), not from any
    backend's code: the backends that filter in Python (vector_partitions.py) share base.metadata_holds,
    and an oracle that called it, or copied it, would agree with them whatever they did."""
    return (
        row.tenant_id == flt.tenant_id
        and row.kb_id in flt.kb_ids
        and (not flt.kinds or row.kind in flt.kinds)
        and (not flt.document_ids or row.document_id in flt.document_ids)
        and (not (flt.parent_ids or flt.or_ids) or row.parent_id in flt.parent_ids or row.id in flt.or_ids)
        and (not flt.ids or row.id in flt.ids)
        and (not flt.statuses or row.status in flt.statuses)
        and (flt.user_id is None or row.user_id == flt.user_id)
        and (flt.session_id is None or row.session_id == flt.session_id)
        and (flt.agent_id is None or row.agent_id == flt.agent_id)
        and (flt.group_id is None or row.group_id == flt.group_id)
        and (flt.run_id is None or row.run_id == flt.run_id)
        and all(_condition_holds(row.metadata, condition) for condition in flt.metadata)
    )


def _condition_holds(metadata: dict, condition) -> bool:
    """One MetadataCondition, case by case as its docstring states it: a row without the key never
    matches; "in" matches a listed value equal to the row's, a string only a string and a number only a
    number (Python's == already says 3 == 3.0); a range holds for a number only."""
    if condition.key not in metadata:
        return False
    stored = metadata[condition.key]
    stored_is_text = isinstance(stored, str)
    if condition.op == "in":
        for wanted in condition.values:
            if isinstance(wanted, str) == stored_is_text and wanted == stored:
                return True
        return False
    if stored_is_text:
        return False
    (bound,) = condition.values
    if condition.op == "gt":
        return stored > bound
    if condition.op == "gte":
        return stored >= bound
    if condition.op == "lt":
        return stored < bound
    if condition.op == "lte":
        return stored <= bound
    raise AssertionError(f"no such metadata operator: {condition.op!r}")


_LITE = pytest.StashKey[str]()


@pytest.fixture(scope="session")
def milvus_lite_uri(request, tmp_path_factory):
    """URI of a Milvus Lite server shared by the whole test session (one, though modules import this
    fixture by name: kept in the session's stash, like `milvus_server` below; three were started)."""
    from retrieval.milvus_lite import ensure_server, stop_server

    stash = request.config.stash
    if _LITE not in stash:
        path = tmp_path_factory.mktemp("milvus") / "milvus.db"
        request.config.add_cleanup(lambda: stop_server(path))
        stash[_LITE] = ensure_server(path)  # a free port; the server also stops by itself once pytest exits
    return stash[_LITE]


def _prefix(sep: str = "_") -> str:
    return f"test{sep}{uuid.uuid4().hex[:10]}"


@pytest.fixture
def sqlite_keyword_index(tmp_path):
    from retrieval.backends.sqlite_fts import SqliteKeywordIndex

    index = SqliteKeywordIndex({"path": str(tmp_path / "keyword.sqlite3")})
    yield index
    index.close()


def memory_backed_dir(tmp_path: Path) -> Path:
    """A new directory in /dev/shm where there is one (the caller removes it), else `tmp_path`.

    For the keyword index (tantivy), which syncs about 14 files per commit: 50-150 ms on this disk,
    under 10 in memory. Tests write in many small commits; the suite should not wait on the disk."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return Path(tempfile.mkdtemp(prefix="loci-test-", dir=shm))
    return tmp_path


@pytest.fixture
def tantivy_keyword_index(tmp_path):
    from retrieval.backends.tantivy_keywords import TantivyKeywordIndex

    directory = memory_backed_dir(tmp_path)
    index = TantivyKeywordIndex({"directory": str(directory / "keyword-index")})
    yield index
    index.close()
    if directory != tmp_path:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def sqlite_vector_index(tmp_path):
    from retrieval.backends.sqlite_vectors import SqliteVectorIndex

    index = SqliteVectorIndex({"path": str(tmp_path / "vectors.sqlite3")})
    yield index
    index.close()


def _milvus(uri: str, **options):
    from retrieval.backends.milvus import MilvusVectorIndex

    index = MilvusVectorIndex({"uri": uri, "collection_prefix": _prefix(), "index_type": "IVF_FLAT", **options})
    yield index
    index.drop_all()
    index.close()


@pytest.fixture
def milvus_vector_index(milvus_lite_uri):
    yield from _milvus(milvus_lite_uri)


# --- a real Milvus server: MILVUS_URI, or Milvus 2.3.5 standalone from the `milvus` package

EMBEDDED_MILVUS_TOKEN = "root:Milvus"  # authentication is on, with Milvus' default root password
# Milvus reads any setting from the environment (proxy.timeTickInterval: PROXY_TIMETICKINTERVAL).
# Shorter intervals than its defaults, for test speed only: a Strong read waits for the next time
# tick (20 ms instead of 200: a filtered query takes ~30 ms instead of ~200); loading a new collection
# waits on the query coordinator's channel check and distribution pull (100 ms, not 1000 and 500).
EMBEDDED_MILVUS_ENV = {"PROXY_TIMETICKINTERVAL": "20", "QUERYCOORD_CHECKCHANNELINTERVAL": "100",
                       "QUERYCOORD_DISTPULLINTERVAL": "100"}


class MilvusServer(NamedTuple):
    uri: str
    token: str
    version: tuple[int, int, int]  # (0, 0, 0) when the server does not say


class EmbeddedMilvusServer:
    """Milvus standalone (embedded etcd, local storage, rocksmq) from the `milvus` wheel, on free ports."""

    def __init__(self, base_dir: Path):
        self.base_dir = Path(base_dir)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120.0) -> str:
        """Start the server and wait until it is healthy; return its URI."""
        import milvus
        from milvus import MilvusServerConfig

        # The binaries (246 MB unpacked from the wheel's lzma files, ~4 s) are cached where the package
        # itself puts them; it rewrites a file only when its checksum changed, and the lock keeps
        # parallel sessions from writing them at once.
        cache = Path(MilvusServerConfig.get_default_data_dir())
        cache.mkdir(parents=True, exist_ok=True)
        with open(cache / ".unpack-lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            milvus._initialize_data_files(str(cache))
        bin_dir = cache / "bin"

        keys = [key for key in MilvusServerConfig().configurable_items if key.endswith("_port")]
        for attempt in range(3):
            # Distinct ports (one free_port() per key could hand out one twice), plus the etcd peer's
            # and the health endpoint's; another process may still take one before Milvus binds it.
            *chosen, peer_port, health_port = free_ports(len(keys) + 2)
            ports = dict(zip(keys, chosen))
            config = MilvusServerConfig(data_dir=str(self.base_dir), **ports)
            config.set("authorization_enabled", True)
            try:
                config.resolve()  # checks every port is free; writes configs/milvus.yaml, makes logs/ and data/
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        # The embedded etcd listens on 2379 and 2380 unless given a config of its own: a second session
        # (or any etcd on this machine) would collide.
        etcd_url, peer_url = f"http://127.0.0.1:{ports['etcd_port']}", f"http://127.0.0.1:{peer_port}"
        etcd_config = self.base_dir / "configs" / "etcd.yaml"
        etcd_config.write_text(json.dumps({
            "name": "default", "listen-client-urls": etcd_url, "advertise-client-urls": etcd_url,
            "listen-peer-urls": peer_url, "initial-advertise-peer-urls": peer_url,
            "initial-cluster": f"default={peer_url}",
        }))
        (self.base_dir / "tmp").mkdir(exist_ok=True)
        env = {**os.environ, **EMBEDDED_MILVUS_ENV, "DEPLOY_MODE": "STANDALONE", "METRICS_PORT": str(health_port),
               "ETCD_CONFIG_PATH": str(etcd_config),
               "TMPDIR": str(self.base_dir / "tmp"),  # where it writes its pid file when /run is not writable
               "LD_LIBRARY_PATH": os.pathsep.join(filter(None, [str(bin_dir), os.environ.get("LD_LIBRARY_PATH")]))}
        with open(self.base_dir / "logs" / "server.log", "ab") as log:
            # cwd: the binary reads configs/milvus.yaml from its working directory.
            self.proc = subprocess.Popen([str(bin_dir / "milvus"), "run", "standalone"], cwd=self.base_dir, env=env,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self._healthy(health_port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"Milvus exited with code {self.proc.returncode}; see {self.base_dir / 'logs'}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"Milvus was not healthy within {timeout:.0f}s; see {self.base_dir / 'logs'}")
            time.sleep(0.1)
        return f"http://127.0.0.1:{ports['proxy_port']}"

    @staticmethod
    def _healthy(port: int) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                return b"OK" in response.read()
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 1 s (as the package does): the data is thrown away, and a graceful
        stop with collections loaded takes over 10 s. Then remove what it leaves outside its directory."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # one process: etcd, coordinators and nodes all run inside it
                self.proc.wait()
        pid, self.proc = self.proc.pid, None
        Path(f"/tmp/milvus/server_id_{pid}").unlink(missing_ok=True)  # a fixed path in 2.3.5, not $TMPDIR
        pid_file = Path("/run/milvus/standalone.pid")  # written there when /run is writable (root)
        try:
            if pid_file.read_text().strip() == str(pid):
                pid_file.unlink()
        except OSError:
            pass


def _server_version(uri: str, token: str) -> tuple[int, int, int]:
    from pymilvus import MilvusClient

    client = MilvusClient(uri=uri, token=token, timeout=30, dedicated=True)
    try:
        match = re.match(r"v?(\d+)\.(\d+)\.(\d+)", client.get_server_version())
    finally:
        client.close()
    return tuple(int(part) for part in match.groups()) if match else (0, 0, 0)


# Kept in the session's stash rather than by the fixture: a session fixture imported into several
# modules is a separate fixture in each, and each would start its own server.
_SERVER = pytest.StashKey[MilvusServer]()
_SERVER_PREFIX = pytest.StashKey[str]()
_EMBEDDED = pytest.StashKey[EmbeddedMilvusServer]()


@pytest.fixture(scope="session")
def milvus_server(request, tmp_path_factory) -> MilvusServer:
    """A Milvus server for the session: MILVUS_URI (+ MILVUS_TOKEN) if set, else an embedded Milvus 2.3.5."""
    stash = request.config.stash
    if _SERVER not in stash:
        if os.environ.get("MILVUS_URI"):
            uri, token = os.environ["MILVUS_URI"], os.environ.get("MILVUS_TOKEN", "")
        else:
            try:
                import milvus  # noqa: F401
            except ImportError:
                pytest.skip("no Milvus server: MILVUS_URI is not set and the `milvus` package (test extra) is missing")
            server = EmbeddedMilvusServer(tmp_path_factory.mktemp("milvus-server"))
            request.config.add_cleanup(server.stop)  # at the end of the session, also if start fails
            uri, token = server.start(), EMBEDDED_MILVUS_TOKEN
            stash[_EMBEDDED] = server
        stash[_SERVER] = MilvusServer(uri, token, _server_version(uri, token))
    return stash[_SERVER]


def release_embedded_milvus(config: pytest.Config) -> None:
    """Stop the session's embedded Milvus server before the session ends: idle, Milvus 2.3 still takes
    a fifth of a core (its time ticks), which the rest of the suite needs. A later test that asks
    for `milvus_server` starts another. A server given by MILVUS_URI is not ours to stop."""
    server = config.stash.get(_EMBEDDED, None)
    if server is None:
        return
    for key in (_EMBEDDED, _SERVER, _SERVER_PREFIX):  # its collections go with its data
        del config.stash[key]
    server.stop()


def server_milvus_index(server: MilvusServer, prefix: str | None = None, **options):
    """A MilvusVectorIndex on `server`, HNSW unless told."""
    from retrieval.backends.milvus import MilvusVectorIndex

    index = MilvusVectorIndex({"uri": server.uri, "token": server.token, "collection_prefix": prefix or _prefix(),
                               "index_type": "HNSW", **options})
    return index


def empty_collections(index) -> None:
    """Delete every row of every collection of `index`'s prefix; the collections stay, loaded."""
    client = index._client()
    pattern = re.compile(rf"^{re.escape(index.prefix)}_(?:t\d+_)?\d+$")
    for name in client.list_collections():
        if pattern.match(name):
            client.delete(name, filter="tenant_id >= 0 or tenant_id < 0")


@pytest.fixture(scope="session")
def _server_collections(request, milvus_server) -> str:
    """One collection prefix for the session's server tests, dropped at the end."""
    stash = request.config.stash
    if _SERVER_PREFIX not in stash:
        index = server_milvus_index(milvus_server)

        def drop():  # cleanups run last-in first-out: before the server stops
            if stash.get(_SERVER_PREFIX, None) == index.prefix:  # not released with its server
                index.drop_all()
            index.close()

        request.config.add_cleanup(drop)
        stash[_SERVER_PREFIX] = index.prefix
    return stash[_SERVER_PREFIX]


@pytest.fixture
def server_milvus_vector_index(milvus_server, _server_collections):
    """A fresh backend on the session's server, as a deployment configures it (HNSW, shared collections).

    Tests share the session's collections and empty them afterwards rather than dropping them: loading
    a new collection takes Milvus 2.3 about 2.5 s, the contract would create ~50. So every backend
    but the first also meets collections another one created, as web and worker processes do.
    """
    index = server_milvus_index(milvus_server, _server_collections)
    yield index
    empty_collections(index)
    index.close()


@pytest.fixture
def opensearch_keyword_index():
    if not os.environ.get("OPENSEARCH_URL"):
        pytest.skip("OPENSEARCH_URL not set")
    from retrieval.backends.opensearch import OpenSearchKeywordIndex

    index = OpenSearchKeywordIndex({"url": os.environ["OPENSEARCH_URL"], "index_prefix": _prefix("-"),
                                    "verify_certs": os.environ.get("OPENSEARCH_VERIFY_CERTS", "1") != "0",
                                    "replicas": 0})
    yield index
    index.drop_all()
    index.close()


@pytest.fixture
def lite_vector_settings(settings, milvus_lite_uri):
    """settings.LOCI_VECTOR_INDEX on the session Milvus Lite server, collections dropped afterwards."""
    from retrieval.backends import reset_backends, vector_index

    settings.LOCI_VECTOR_INDEX = {
        "BACKEND": "retrieval.backends.milvus.MilvusVectorIndex",
        "OPTIONS": {"uri": milvus_lite_uri, "collection_prefix": _prefix(), "index_type": "IVF_FLAT"},
    }
    yield settings.LOCI_VECTOR_INDEX
    vector_index().drop_all()
    reset_backends()
