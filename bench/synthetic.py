"""Synthetic chunks for the vector-store benchmarks and the recall tests.

No encoder: the vectors are made here, so a collection of 20,000 chunks is written in
seconds and every filter's selectivity is known exactly.

* Dense vectors are unit vectors drawn around a few dozen random centres (embeddings
  cluster by topic; uniformly random vectors would be an unrealistically hard case for
  HNSW and hide the filter's effect behind the graph's own misses).
* Sparse vectors hold a few random terms of a small vocabulary with random weights, so
  a query term is shared by many chunks and no two scores tie.
* ``source`` takes values that select fixed shares of the chunks, independent of the
  vectors (:data:`SOURCES`): ``p50`` half of them, ``p5`` 5 %, ``p0.5`` 0.5 % and
  ``n5`` exactly five; the rest are ``other``.

The exact answers (:meth:`Corpus.exact_dense`, :meth:`Corpus.exact_sparse`) are brute
force over the same vectors, in numpy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hsearch.types import SparseVector
from hsearch.vectorstore.protocol import ChunkRecord

# source value -> share of the chunks it selects (a float) or a number of chunks (an int)
SOURCES: dict[str, float | int] = {"p50": 0.5, "p5": 0.05, "p0.5": 0.005, "n5": 5}
CENTRES = 64
VOCABULARY = 256
TERMS_PER_CHUNK = 8
TERMS_PER_QUERY = 8

Vectors = np.ndarray[Any, np.dtype[np.float32]]


def chunk_key(tenant: str, i: int) -> str:
    """A chunk id shaped like the product's (32 hex digits of a hash)."""
    return hashlib.sha256(f"{tenant}\x00{i}".encode()).hexdigest()[:32]


@dataclass
class Corpus:
    """``size`` chunks of one tenant, their vectors and ``source`` values."""

    tenant: str
    dense: Vectors
    sparse: list[SparseVector]
    source: list[str]
    ids: list[str]
    _rng: np.random.Generator = field(repr=False)
    _centres: Vectors = field(repr=False)
    _postings: dict[int, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]] = field(repr=False)

    @classmethod
    def generate(cls, size: int, *, dim: int, tenant: str = "bench", seed: int = 7) -> Corpus:
        rng = np.random.default_rng(seed)
        centres = rng.normal(size=(CENTRES, dim)).astype(np.float32)
        dense = _around(rng, centres, size)
        # Terms drawn with replacement: a repeated term merges, so a few chunks hold 7.
        terms = rng.integers(0, VOCABULARY, (size, TERMS_PER_CHUNK))
        weights = rng.uniform(0.1, 1.0, (size, TERMS_PER_CHUNK))
        sparse = [
            SparseVector.from_mapping(dict(zip(t.tolist(), w.tolist(), strict=True)))
            for t, w in zip(terms, weights, strict=True)
        ]
        postings: dict[int, list[tuple[int, float]]] = {}
        for row, vector in enumerate(sparse):
            for term, weight in zip(vector.indices, vector.values, strict=True):
                postings.setdefault(term, []).append((row, weight))
        source = ["other"] * size
        order = rng.permutation(size)
        start = 0
        for value, share in SOURCES.items():
            count = share if isinstance(share, int) else round(share * size)
            for row in order[start : start + count]:
                source[int(row)] = value
            start += count
        return cls(
            tenant=tenant,
            dense=dense,
            sparse=sparse,
            source=source,
            ids=[chunk_key(tenant, i) for i in range(size)],
            _rng=rng,
            _centres=centres,
            _postings={
                term: (
                    np.asarray([r for r, _ in rows], dtype=np.int64),
                    np.asarray([w for _, w in rows], dtype=np.float64),
                )
                for term, rows in postings.items()
            },
        )

    def __len__(self) -> int:
        return len(self.ids)

    def records(self, start: int = 0, stop: int | None = None) -> list[ChunkRecord]:
        """Chunks ``start:stop`` as the store writes them."""
        return [
            ChunkRecord(
                chunk_id=self.ids[i],
                document_id=f"doc-{i}",
                tenant_id=self.tenant,
                external_id=f"doc-{i}",
                title=f"chunk {i}",
                text=f"synthetic chunk {i}",
                ordinal=0,
                dense=tuple(self.dense[i].tolist()),
                sparse=self.sparse[i],
                source=self.source[i],
            )
            for i in range(start, len(self) if stop is None else min(stop, len(self)))
        ]

    def dense_queries(self, count: int) -> Vectors:
        """Query vectors drawn like the chunks' (near the same centres)."""
        return _around(self._rng, self._centres, count)

    def sparse_queries(self, count: int) -> list[SparseVector]:
        """Query vectors of a few vocabulary terms each, with random weights."""
        queries = []
        for _ in range(count):
            terms = self._rng.choice(VOCABULARY, TERMS_PER_QUERY, replace=False)
            weights = self._rng.uniform(0.5, 1.0, TERMS_PER_QUERY)
            queries.append(
                SparseVector.from_mapping(dict(zip(terms.tolist(), weights.tolist(), strict=True)))
            )
        return queries

    def mask(self, source: str | None) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """Rows with this ``source`` (every row for ``None``)."""
        if source is None:
            return np.ones(len(self), dtype=bool)
        return np.asarray([s == source for s in self.source], dtype=bool)

    def exact_dense(
        self, query: Sequence[float] | Vectors, *, source: str | None, limit: int
    ) -> list[str]:
        """Ids of the ``limit`` best inner products among the rows with ``source``."""
        rows = np.flatnonzero(self.mask(source))
        scores = self.dense[rows] @ np.asarray(query, dtype=np.float32)
        best = rows[np.argsort(-scores, kind="stable")[:limit]]
        return [self.ids[int(i)] for i in best]

    def exact_sparse(self, query: SparseVector, *, source: str | None, limit: int) -> list[str]:
        """Ids of the ``limit`` best positive inner products among the rows with
        ``source`` (an inverted index only finds rows sharing a term)."""
        scores = np.zeros(len(self), dtype=np.float64)
        touched = np.zeros(len(self), dtype=bool)
        for term, weight in zip(query.indices, query.values, strict=True):
            if term in self._postings:
                rows, values = self._postings[term]
                np.add.at(scores, rows, values * weight)
                touched[rows] = True
        rows = np.flatnonzero(touched & self.mask(source))
        best = rows[np.argsort(-scores[rows], kind="stable")[:limit]]
        return [self.ids[int(i)] for i in best]


def recall(found: Sequence[str], expected: Sequence[str]) -> float:
    """Share of ``expected`` in ``found`` (1.0 when nothing is expected)."""
    if not expected:
        return 1.0
    return len(set(found) & set(expected)) / len(expected)


def _around(rng: np.random.Generator, centres: Vectors, count: int) -> Vectors:
    picked = centres[rng.integers(0, len(centres), count)]
    vectors = picked + rng.normal(size=picked.shape).astype(np.float32)
    normalised: Vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(
        np.float32
    )
    return normalised
