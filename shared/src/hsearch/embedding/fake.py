"""A deterministic encoder with no model, for unit tests and the in-memory store.

Dense: each lexical term owns a pseudo-random vector derived from its hash; a text's
vector is the normalised sum of its terms' vectors (with repetition). Texts sharing words
are therefore similar, unrelated texts nearly orthogonal, and nothing is downloaded or
loaded. Sparse: the lexical analyzer's term counts, exactly like the offline encoder, so
the BM25 path of the pipeline is exercised too. Tokens: the analyzer's words, and each
character of a CJK run (:class:`AnalyzerTokenizer`), within a window of ``max_tokens``.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from hsearch.embedding.protocol import (
    EMPTY_SPARSE,
    Embedding,
    EncoderInfo,
    SparseKind,
    Tokenizer,
    check_sides,
    document_langs,
)
from hsearch.lexical.analyzer import (
    ANALYZER_VERSION,
    analyze,
    analyze_query,
    term_id,
    token_count,
    token_spans,
)
from hsearch.types import SparseVector

__all__ = ["AnalyzerTokenizer", "FakeEmbedder"]

_VERSION = f"fake1.{ANALYZER_VERSION}"

# The vector of a text with no terms (empty, punctuation only): any fixed unit vector
# keeps the Embedding contract (L2-normalised) and makes all such texts identical.
_NO_TERMS = "\x00no-terms"

_MAX_DIMENSION = 32768  # Milvus' limit for float vectors


@lru_cache(maxsize=65536)
def _term_vector(term: str, dimension: int) -> tuple[float, ...]:
    """``dimension`` values uniform in [-1, 1), from BLAKE2b in counter mode."""
    values: list[float] = []
    block = 0
    while len(values) < dimension:
        digest = hashlib.blake2b(
            term.encode("utf-8"),
            digest_size=64,
            person=b"hsearch.fake",
            salt=block.to_bytes(16, "big"),
        ).digest()
        values.extend(
            int.from_bytes(digest[i : i + 2], "big") / 32768.0 - 1.0 for i in range(0, 64, 2)
        )
        block += 1
    return tuple(values[:dimension])


class AnalyzerTokenizer:
    """Deterministic tokens without a model: each word the lexical analyzer finds, and
    each character of a CJK run (which it reads as bigrams, about one per character).
    Punctuation and white space are no tokens. Counts add up over texts cut between
    tokens, like a WordPiece tokenizer's over texts cut between words."""

    def __init__(self, max_tokens: int = 512) -> None:
        if isinstance(max_tokens, bool) or max_tokens < 1:
            msg = f"max_tokens must be >= 1, got {max_tokens!r}"
            raise ValueError(msg)
        self._max_tokens = max_tokens

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return token_spans(text)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [token_count(text) for text in texts]


class FakeEmbedder:
    """Hashing encoder: deterministic, instant, lexically meaningful.

    ``dense_computed`` and ``sparse_computed`` count the texts each side was computed
    for, so a test can check that a search encodes only what its legs read.
    """

    def __init__(self, dimension: int = 32, *, max_tokens: int = 512) -> None:
        if isinstance(dimension, bool) or not 2 <= dimension <= _MAX_DIMENSION:
            msg = f"dimension must be within [2, {_MAX_DIMENSION}], got {dimension!r}"
            raise ValueError(msg)
        self._tokenizer = AnalyzerTokenizer(max_tokens)
        self._info = EncoderInfo(
            name="fake",
            dimension=dimension,
            version=_VERSION,
            sparse_kind=SparseKind.TERM_FREQUENCY,
            sparse_needs_model=False,
        )
        self.dense_computed = 0
        self.sparse_computed = 0

    @property
    def info(self) -> EncoderInfo:
        return self._info

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        """Encode passages; the sparse counts sum to each passage's length in terms,
        analysed in the passage's language (``langs``; unknown when ``None``)."""
        return [
            self._embed(terms, terms)
            for terms in (
                analyze(text, lang=lang)
                for text, lang in zip(texts, document_langs(texts, langs), strict=True)
            )
        ]

    def embed_query(self, text: str, *, dense: bool = True, sparse: bool = True) -> Embedding:
        """Encode one query, only the sides asked for: the dense side from the terms a
        document with this text would have, the sparse side from the query's terms
        (:func:`analyze_query`)."""
        check_sides(dense=dense, sparse=sparse)
        return self._embed(
            analyze(text) if dense else None, analyze_query(text) if sparse else None
        )

    def embed_queries(
        self, texts: Sequence[str], *, dense: bool = True, sparse: bool = True
    ) -> list[Embedding]:
        """Encode queries one by one (:meth:`embed_query`: no model, nothing to batch)."""
        check_sides(dense=dense, sparse=sparse)
        return [self.embed_query(text, dense=dense, sparse=sparse) for text in texts]

    def embed_query_without_model(self, text: str) -> SparseVector | None:
        """The query's term counts, as :meth:`embed_query` makes its sparse side (there
        is no model: the dense side is made without one too)."""
        return self._embed(None, analyze_query(text)).sparse

    def _embed(self, terms: list[str] | None, sparse_terms: list[str] | None) -> Embedding:
        vector: tuple[float, ...] = ()
        counts = EMPTY_SPARSE
        if terms is not None:
            self.dense_computed += 1
            vector = self._dense(terms)
        if sparse_terms is not None:
            self.sparse_computed += 1
            tf = Counter(term_id(term) for term in sparse_terms)
            counts = SparseVector.from_mapping({i: float(n) for i, n in tf.items()})
        return Embedding(dense=vector, sparse=counts)

    def _dense(self, terms: list[str]) -> tuple[float, ...]:
        dimension = self._info.dimension
        total = [0.0] * dimension
        for term in terms:
            for i, value in enumerate(_term_vector(term, dimension)):
                total[i] += value
        norm = math.sqrt(sum(v * v for v in total))
        if norm == 0.0:
            # No terms; or (astronomically unlikely) vectors that cancel exactly.
            total = list(_term_vector(_NO_TERMS, dimension))
            norm = math.sqrt(sum(v * v for v in total))
        return tuple(v / norm for v in total)
