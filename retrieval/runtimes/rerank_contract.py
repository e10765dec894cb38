"""What every reranker is held to: the Reranker protocol, RerankError and the argument check.

Apart from rerankers.py (which builds the configured chain and imports the model runtimes lazily) so
that a runtime (cross_encoder.py, e5_rerank.py) can follow the contract without importing the chain
that imports it: the one import circle of the house was e5_rerank <-> rerankers (issue 38).
"""

from typing import Protocol


class RerankError(Exception):
    """A reranker could not score the passages (unreachable, refused, or an incomplete reply)."""


class Reranker(Protocol):
    """Scores every text against the query; one float per text, in the texts' order.

    Construction: the BACKEND of a LOCI_RERANKERS alias, called with its OPTIONS, returns a
    reranker or None (reranking not configured); bad settings raise ImproperlyConfigured.
    Shared by threads only when it sets `thread_safe = True`.
    """

    name: str

    def rerank(self, query: str, texts: list[str]) -> list[float]:
        """Exactly len(texts) finite floats, higher is more relevant, comparable within one call.
        TypeError for a non-str query or a bare string as texts; RerankError when any passage
        could not be scored (the caller then keeps its own order): never a partial list."""
        ...


def check_args(query: str, texts: list[str]) -> list[str]:
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, got {type(query).__name__}")
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings, not one string")
    return list(texts)
