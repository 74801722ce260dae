"""Chunk storage and the two search legs: Milvus (real) and in-memory (fake)."""
