"""Lexical side of the sparse leg: the analyzer, BM25 math and per-tenant statistics.

Nothing is re-exported here: the encoders import :mod:`hsearch.lexical.analyzer` alone,
and that import must not pull in the database layer that :mod:`.statistics` needs.
"""
