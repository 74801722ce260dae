"""The query-embedding cache: a repeated query text skips the model.

Encoding a query does not depend on the tenant (the tenant's BM25 statistics are
applied to the encoder's term counts afterwards, :meth:`LexicalStatistics.weigh_query`),
so one cache serves every tenant. Each side of a query's embedding (dense, sparse) is
kept on its own, under the encoder's fingerprint and the text: first in an in-process
LRU (``cache.embedding_lru_size``), then in the shared store (Redis,
``cache.embedding_ttl_s``), and computed only when neither has it. The key is the
normalised text (:func:`normalise_query`: Unicode NFC, runs of white space as one space,
none at the ends), and the model is given that same text, cached or not, so a cached
vector is the one the model computes for it; texts that differ only in white space or
in how an accented letter is composed share one entry.

Vectors are stored as packed binary doubles, so a cached vector equals the computed
one bit for bit.

What misses every cache goes to the model: through the query micro-batcher when one is
given (:class:`~hsearch.embedding.batching.QueryBatcher`: concurrent misses share one
model call), else on a worker thread of its own. A side is stored only once the model
computed it: a call that fails, or that its caller cancels (a search past its
deadline), stores nothing.
"""

from __future__ import annotations

import hashlib
import struct
import unicodedata
from array import array
from functools import partial

import anyio.to_thread
from cachetools import LRUCache

from hsearch.cache.guard import CacheCounters, CacheKind, CacheOutcome, GuardedCache
from hsearch.cache.keys import cache_key
from hsearch.embedding.batching import QueryBatcher
from hsearch.embedding.protocol import Embedder, Embedding
from hsearch.errors import CacheUnavailableError
from hsearch.types import DenseVector, SparseVector

__all__ = [
    "QueryEncoder",
    "decode_dense",
    "decode_sparse",
    "encode_dense",
    "encode_sparse",
    "normalise_query",
]

_DENSE, _SPARSE = "dense", "sparse"
_EMPTY_SPARSE = SparseVector((), ())

Side = DenseVector | SparseVector


def normalise_query(text: str) -> str:
    """``text`` as the encoder is given it: Unicode NFC, runs of white space as one
    space, none at the ends."""
    return " ".join(unicodedata.normalize("NFC", text).split())


class QueryEncoder:
    """Encodes queries through ``embedder``, with the caches configured (none by
    default: every query runs the model), and the model calls through ``batcher``
    when given (it must wrap the same ``embedder``)."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        store: GuardedCache | None = None,
        namespace: str = "default",
        lru_size: int = 0,
        ttl_s: float = 0.0,
        counters: CacheCounters | None = None,
        batcher: QueryBatcher | None = None,
    ) -> None:
        if batcher is not None and batcher.embedder is not embedder:
            msg = "the query batcher wraps another encoder than the query encoder's"
            raise ValueError(msg)
        self._embedder = embedder
        self._batcher = batcher
        self._store = store if ttl_s > 0 else None
        self._namespace = namespace
        self._ttl_s = ttl_s
        self._lru: LRUCache[tuple[str, str], Side] | None = (
            LRUCache(maxsize=lru_size) if lru_size > 0 else None
        )
        self._fingerprint = hashlib.sha256(embedder.info.fingerprint.encode()).hexdigest()[:16]
        self._counters = counters
        self.model_calls = 0
        """How often the model ran (a cache that works keeps this low)."""

    @property
    def caching(self) -> bool:
        return self._lru is not None or self._store is not None

    async def embed_query(self, text: str, *, dense: bool, sparse: bool) -> tuple[Embedding, bool]:
        """The sides of ``text``'s embedding asked for (of its normalised form), and
        whether all of them came from a cache (the model did not run)."""
        text = normalise_query(text)
        wanted = [side for side, asked in ((_DENSE, dense), (_SPARSE, sparse)) if asked]
        if not self.caching:
            return await self._compute(text, wanted), False
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        found: dict[str, Side] = {}
        for side in wanted:
            hit = self._lru.get((side, digest)) if self._lru is not None else None
            if hit is not None:
                found[side] = hit
        error = False
        if self._store is not None:
            for side in wanted:
                if side in found:
                    continue
                try:
                    raw = await self._store.get(self._key(side, digest))
                except CacheUnavailableError:
                    error = True
                    break
                if raw is not None:
                    found[side] = _decode(side, raw)
                    self._remember(side, digest, found[side])
        missing = [side for side in wanted if side not in found]
        self._count(CacheOutcome.ERROR if error and missing else _outcome(missing))
        if missing:
            computed = await self._compute(text, missing)
            for side in missing:
                vector = computed.dense if side == _DENSE else computed.sparse
                found[side] = vector
                self._remember(side, digest, vector)
                if self._store is not None and not error:
                    await self._store.set(
                        self._key(side, digest), _encode(vector), ttl_s=self._ttl_s
                    )
        dense_side, sparse_side = found.get(_DENSE), found.get(_SPARSE)
        embedding = Embedding(
            dense=dense_side if isinstance(dense_side, tuple) else (),
            sparse=sparse_side if isinstance(sparse_side, SparseVector) else _EMPTY_SPARSE,
        )
        return embedding, not missing

    async def _compute(self, text: str, sides: list[str]) -> Embedding:
        self.model_calls += 1
        if self._batcher is not None:
            return await self._batcher.embed_query(
                text, dense=_DENSE in sides, sparse=_SPARSE in sides
            )
        embed = partial(
            self._embedder.embed_query, text, dense=_DENSE in sides, sparse=_SPARSE in sides
        )
        # A caller that gives up (a search past its deadline) is not held until a hung
        # model returns; the thread finishes on its own, and its result is dropped.
        return await anyio.to_thread.run_sync(embed, abandon_on_cancel=True)

    def _remember(self, side: str, digest: str, vector: Side) -> None:
        if self._lru is not None:
            self._lru[side, digest] = vector

    def _key(self, side: str, digest: str) -> str:
        return cache_key(self._namespace, "embedding", self._fingerprint, side, digest)

    def _count(self, outcome: CacheOutcome) -> None:
        if self._counters is not None:
            self._counters.record(CacheKind.EMBEDDING, outcome)


def _outcome(missing: list[str]) -> CacheOutcome:
    return CacheOutcome.MISS if missing else CacheOutcome.HIT


def encode_dense(vector: DenseVector) -> bytes:
    return array("d", vector).tobytes()


def decode_dense(raw: bytes) -> DenseVector:
    return tuple(array("d", raw))


def encode_sparse(vector: SparseVector) -> bytes:
    n = len(vector.indices)
    return struct.pack("<I", n) + array("q", vector.indices).tobytes() + encode_dense(vector.values)


def decode_sparse(raw: bytes) -> SparseVector:
    (n,) = struct.unpack_from("<I", raw)
    indices = array("q", raw[4 : 4 + 8 * n])
    values = array("d", raw[4 + 8 * n :])
    return SparseVector(tuple(indices), tuple(values))


def _encode(vector: Side) -> bytes:
    if isinstance(vector, SparseVector):
        return encode_sparse(vector)
    return encode_dense(vector)


def _decode(side: str, raw: bytes) -> Side:
    return decode_sparse(raw) if side == _SPARSE else decode_dense(raw)
