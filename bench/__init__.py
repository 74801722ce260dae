"""Benchmarks of hsearch: relevance on real evaluation sets (``python -m bench.relevance``)."""
