"""Ingest path: chunking, deterministic ids, the indexing pipeline and the job service."""
