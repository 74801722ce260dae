"""BM25 as a sparse inner product, for encoders whose sparse side is term counts.

Okapi BM25 factors into a document side and a query side::

    score(q, d) = Σ_t  w_q(t) · w_d(t)
    w_q(t) = idf(t)                                                     (query side)
    w_d(t) = tf(t, d)·(k1 + 1) / (tf(t, d) + k1·(1 - b + b·|d| / avgdl))  (document side)

so a document is stored with its saturated term weights and a query is sent with its
terms' IDF: the vector store's inner product over sparse vectors is then BM25 exactly.
The document side is computed at indexing time with the corpus statistics of that moment
(``avg_length``); the query side with the statistics at query time. These functions are
pure and do no I/O; :mod:`hsearch.lexical.statistics` owns the statistics and applies them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from hsearch.types import SparseVector

__all__ = ["DEFAULT_B", "DEFAULT_K1", "bm25_document_weights", "bm25_idf", "bm25_query_weights"]

DEFAULT_K1 = 1.2
"""Term-frequency saturation (Lucene's and Elasticsearch's default)."""
DEFAULT_B = 0.75
"""Length normalisation strength (Lucene's and Elasticsearch's default)."""


def _check_counts(tf: SparseVector, *, what: str) -> None:
    values = tf.values
    if not values or (min(values) >= 0.0 and math.isfinite(sum(values))):
        # Every count finite and >= 0 (a NaN or an infinity makes the sum so); checked
        # in C: indexing weighs every chunk's terms. Else the loop names the term.
        return
    for index, value in zip(tf.indices, values, strict=True):
        if not (math.isfinite(value) and value >= 0.0):
            msg = f"{what} term frequencies must be finite and >= 0; term {index} has {value}"
            raise ValueError(msg)


def bm25_document_weights(
    tf: SparseVector,
    *,
    length: int,
    avg_length: float,
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
) -> SparseVector:
    """Saturated BM25 term weights of one document.

    Args:
        tf: The document's raw term counts (the offline encoder's sparse vector).
        length: The document's length in terms (the sum of its counts).
        avg_length: The corpus' average document length in terms, > 0.
        k1: Saturation, >= 0: 0 makes every present term weigh 1 regardless of count.
        b: Length normalisation in [0, 1]: 0 ignores length, 1 normalises fully.

    Returns:
        ``tf·(k1 + 1) / (tf + k1·(1 - b + b·length / avg_length))`` per term, each in
        ``(0, k1 + 1)`` (the bound itself only for ``length`` 0 with ``b`` 1); terms with
        a zero count are left out.

    Raises:
        ValueError: An argument is out of its range (the message says which and why).
    """
    if isinstance(length, bool) or not isinstance(length, int) or length < 0:
        msg = f"length must be an int >= 0, got {length!r}"
        raise ValueError(msg)
    if not (math.isfinite(avg_length) and avg_length > 0.0):
        msg = f"avg_length must be finite and > 0, got {avg_length!r}"
        raise ValueError(msg)
    if not (math.isfinite(k1) and k1 >= 0.0):
        msg = f"k1 must be finite and >= 0, got {k1!r}"
        raise ValueError(msg)
    if not (math.isfinite(b) and 0.0 <= b <= 1.0):
        msg = f"b must be within [0, 1], got {b!r}"
        raise ValueError(msg)
    _check_counts(tf, what="document")
    norm = k1 * (1.0 - b + b * length / avg_length)
    saturated = k1 + 1.0
    counts, indices = tf.values, tf.indices
    if counts and min(counts) > 0.0 and list(indices) == sorted(indices):
        # Every term present and the indices in order (as SparseVector keeps them): the
        # weights in place, each > 0; indexing weighs every chunk's terms, and building
        # and sorting a mapping was two thirds of the time.
        return SparseVector(indices, tuple([c * saturated / (c + norm) for c in counts]))
    return SparseVector.from_mapping(
        {
            index: count * saturated / (count + norm)
            for index, count in zip(indices, counts, strict=True)
            if count > 0.0
        }
    )


def bm25_idf(document_frequency: int, *, document_count: int) -> float:
    """BM25 inverse document frequency, ``ln(1 + (N - df + 0.5) / (df + 0.5))``.

    The Lucene variant: always > 0 for ``0 <= df <= N``, so a term present in every
    document still counts a little instead of penalising the documents that have it.

    Raises:
        ValueError: ``df`` is outside ``[0, document_count]``.
    """
    if not 0 <= document_frequency <= document_count:
        msg = (
            f"document_frequency must be within [0, document_count={document_count}], "
            f"got {document_frequency}"
        )
        raise ValueError(msg)
    return math.log1p((document_count - document_frequency + 0.5) / (document_frequency + 0.5))


def bm25_query_weights(
    tf: SparseVector,
    *,
    document_frequencies: Mapping[int, int],
    document_count: int,
) -> SparseVector:
    """IDF weights of a query's terms.

    Each distinct query term counts once, whatever its count in the query (Lucene's
    convention: repeating a word in a query does not make it matter more). Terms no
    document contains (df 0 or absent from ``document_frequencies``) are left out: they
    cannot match anything.

    Args:
        tf: The query's raw term counts.
        document_frequencies: For each term id, how many documents contain it; may hold
            more terms than the query.
        document_count: How many documents the statistics cover (N), >= 0.

    Raises:
        ValueError: ``document_count`` is negative, a query count is negative or not
            finite, or a query term's document frequency is outside ``[0, N]``
            (statistics from two different moments).
    """
    if isinstance(document_count, bool) or not isinstance(document_count, int):
        msg = f"document_count must be an int >= 0, got {document_count!r}"
        raise ValueError(msg)
    if document_count < 0:
        msg = f"document_count must be >= 0, got {document_count}"
        raise ValueError(msg)
    _check_counts(tf, what="query")
    weights: dict[int, float] = {}
    for index, count in zip(tf.indices, tf.values, strict=True):
        if count <= 0.0:
            continue
        df = document_frequencies.get(index, 0)
        if not 0 <= df <= document_count:
            msg = (
                f"document frequency of term {index} is {df}, outside [0, document_count="
                f"{document_count}]: the statistics are inconsistent"
            )
            raise ValueError(msg)
        if df > 0:
            weights[index] = bm25_idf(df, document_count=document_count)
    return SparseVector.from_mapping(weights)
