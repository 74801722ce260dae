"""hsearch HTTP API (FastAPI)."""
