"""Answers with citations over a tenant's documents (``POST /v1/answer``): retrieval,
context packing, generation on any OpenAI-compatible model, citations checked by code,
streamed (docs/answers.md)."""
