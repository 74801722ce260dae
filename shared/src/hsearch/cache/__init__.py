"""Caches in front of the query path: the byte store they share (Redis, or an in-process
one), guarded so that a store outage bypasses them; the query-embedding cache. The
result cache, which knows plans and results, is :mod:`hsearch.search.caching`."""
