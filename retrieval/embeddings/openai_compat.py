"""Any OpenAI-compatible `/embeddings` endpoint (OpenAI, vLLM, TEI, Ollama, a self-hosted Qwen3-Embedding)."""

import hashlib
import threading

import numpy as np
import openai

from retrieval.embeddings.base import EmbeddingError, batches, check_texts, empty, normalise_rows

# The server did not answer, was busy or failed on its side: the same request later may succeed.
TRANSIENT_ERRORS = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)


class OpenAICompatEmbedder:
    """Embeddings from a remote OpenAI-compatible server, in batches, validated and L2-normalised."""

    thread_safe = True  # openai.OpenAI is thread-safe; the learnt width is set under _dim_lock

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "none",
        dim: int = 0,
        timeout: float = 30.0,
        max_retries: int = 1,
        batch_size: int = 64,
        query_prefix: str = "",
        document_prefix: str = "",
    ):
        if not model:
            raise ValueError("an OpenAI-compatible embedder needs a model name (EMBEDDING_MODEL)")
        self.base_url = base_url
        self.model = model
        self.batch_size = batch_size
        # Instruction-tuned models want them (e5: "query: "/"passage: "; Qwen3-Embedding: "Instruct: ...\nQuery: ").
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self._dim = dim
        self._dim_lock = threading.Lock()
        self.name = f"openai:{model}"
        if dim:
            self.name += f":{dim}"
        if query_prefix or document_prefix:
            # Prefixes change the vectors, so they are part of the vector space's name.
            self.name += ":" + hashlib.sha256(f"{query_prefix}\x00{document_prefix}".encode()).hexdigest()[:8]
        self._client = openai.OpenAI(base_url=base_url or None, api_key=api_key or "none", timeout=timeout, max_retries=max_retries)

    @property
    def dim(self) -> int:
        """The configured width, or, when none was configured, the width of a one-off probe."""
        if not self._dim:
            with self._dim_lock:
                if not self._dim:
                    self._dim = self._request(["dimension probe"]).shape[1]
        return self._dim

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return empty(self.dim)
        rows = [self._request([self.document_prefix + t for t in batch]) for batch in batches(texts, self.batch_size)]
        return normalise_rows(np.vstack(rows))

    def embed_query(self, text: str) -> np.ndarray:
        return normalise_rows(self._request([self.query_prefix + text]))[0]

    def _request(self, inputs: list[str]) -> np.ndarray:
        # The API rejects empty strings; a space embeds as "nothing" without failing the batch.
        inputs = [t if t.strip() else " " for t in inputs]
        try:
            response = self._client.embeddings.create(model=self.model, input=inputs, encoding_format="float")
        except openai.OpenAIError as exc:
            raise EmbeddingError(f"embedding request to {self.base_url or 'OpenAI'} failed: {exc}",
                                 transient=isinstance(exc, TRANSIENT_ERRORS)) from exc
        data = sorted(response.data or [], key=lambda item: item.index)
        if [item.index for item in data] != list(range(len(inputs))):
            raise EmbeddingError(f"the server returned {len(data)} embeddings for {len(inputs)} inputs")
        try:
            matrix = np.array([item.embedding for item in data], dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbeddingError(f"the server returned malformed embeddings: {exc}") from exc
        if matrix.ndim != 2 or (self._dim and matrix.shape[1] != self._dim):
            raise EmbeddingError(f"the server returned {matrix.shape[-1]}-d vectors, expected {self._dim} (EMBEDDING_DIM)")
        return matrix
