"""The model runtimes of retrieval: ONNX graphs, tokenizers, ColBERT, the cross-encoders and the reranker slot.

Embedders live in retrieval/embeddings/; the search stages that call these in retrieval/search/."""
