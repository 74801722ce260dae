"""Rerank: a cross-encoder re-scores the fused candidates, reading query and passage together.

The optional last ranking step of the search path. The first stage (dense + sparse legs,
fused) is cheap but judges query and passage apart; a cross-encoder reads each
``(query, passage)`` pair through one transformer and scores how well the passage answers
the query, which is slower and better. It therefore sees only the top few fused hits.

- :mod:`~hsearch.rerank.protocol`: :class:`Reranker`, what the search service types against.
- :mod:`~hsearch.rerank.flag`: :class:`FlagRerankerAdapter`, FlagEmbedding's ``FlagReranker``.
- :mod:`~hsearch.rerank.fake`: :class:`FakeReranker`, query-term overlap, for tests.
- :mod:`~hsearch.rerank.factory`: :func:`create_reranker`, the configured reranker or none.

Ordering hits by the new scores is ranking, not scoring: it lives with the search
ranking code (:func:`hsearch.search.ranking.rerank`, pure).
"""
