"""Encoders: BGE-M3 (production), offline (MiniLM + BM25 lexical), fake (tests)."""

from hsearch.embedding.protocol import Embedder, Embedding, EncoderInfo, SparseKind

__all__ = ["Embedder", "Embedding", "EncoderInfo", "SparseKind"]
