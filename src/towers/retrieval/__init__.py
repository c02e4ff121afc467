"""Retrieval: BM25 through Pyserini (bm25.py), dense encoding (encode.py) into streamed matrices (matrix.py),
Faiss indexes (vector_index.py), cross-encoder reranking (rerank.py), run fusion (fusion.py), latency
(latency.py) and the evaluation of runs (evaluate.py). Nothing here trains."""
