"""Per-key rate limits and the per-process cap on concurrent searches (docs/api.md, Limits).

``policy`` decides which limits apply to a request (pure); ``limiter`` counts hits in
Redis through the ``limits`` library, falling back to counting in the process while
Redis does not answer; ``redis`` is the thin adapter that opens the Redis storage;
``concurrency`` is the search gate.
"""
