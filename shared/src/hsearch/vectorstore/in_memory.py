"""An in-memory :class:`~hsearch.vectorstore.protocol.VectorStore` for fast tests.

Exact (brute-force) inner-product search over both vector kinds, with the same
filter semantics as Milvus (``hsearch.vectorstore.filters.matches``). It passes the same
contract suite as the Milvus store (tests/integration/test_vectorstore_contract.py).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from hsearch.embedding.protocol import EncoderInfo
from hsearch.errors import EncoderMismatchError
from hsearch.types import DenseVector, SparseVector
from hsearch.vectorstore.filters import FilterNode, matches
from hsearch.vectorstore.protocol import (
    ChunkRecord,
    StoredHit,
    VectorStore,
    answered,
    best_of,
    require_tenant,
)
from hsearch.vectorstore.schema import CANDIDATE_FIELDS, PRIMARY_FIELD, UPDATABLE_FIELDS


class InMemoryVectorStore:
    def __init__(self, *, name: str = "memory") -> None:
        self._rows: dict[str, ChunkRecord] = {}
        self._encoder: str | None = None
        self._name = name
        self._base = name  # new collections are <base>_v1, _v2...
        self._generation = 0

    def ensure_collection(self, encoder: EncoderInfo) -> None:
        if self._encoder is None:
            self._encoder = encoder.fingerprint
        elif self._encoder != encoder.fingerprint:
            msg = (
                f"collection was built with encoder {self._encoder!r}, "
                f"but the configured encoder is {encoder.fingerprint!r}; rebuild it with "
                "`hsearch reindex`"
            )
            raise EncoderMismatchError(msg)

    def new_collection(self, encoder: EncoderInfo) -> InMemoryVectorStore:
        self._generation += 1
        built = InMemoryVectorStore(name=f"{self._base}_v{self._generation}")
        built.ensure_collection(encoder)
        return built

    def swap_in(self, built: VectorStore) -> str | None:
        """Take over ``built``'s rows and encoder; the previous rows are gone with the
        swap, so :meth:`drop_previous` has nothing left to drop."""
        if not isinstance(built, InMemoryVectorStore):
            msg = f"cannot swap a {type(built).__name__} into an in-memory store"
            raise TypeError(msg)
        previous = self.live_collection()
        self._rows, self._encoder, self._name = dict(built._rows), built._encoder, built._name
        return previous

    def drop_previous(self, name: str) -> None:
        """Nothing to drop: :meth:`swap_in` let the previous rows go."""

    def live_collection(self) -> str | None:
        return self._name if self._encoder is not None else None

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        for record in records:
            require_tenant(record.tenant_id)
        for record in records:
            self._rows[record.chunk_id] = record

    def send_upsert(self, records: Sequence[ChunkRecord]) -> Callable[[], None]:
        """:meth:`upsert`, done when it returns (nothing is left to wait for)."""
        self.upsert(records)
        return answered

    def delete_chunks(self, chunk_ids: Sequence[str], *, tenant_id: str) -> None:
        require_tenant(tenant_id)
        for cid in chunk_ids:
            row = self._rows.get(cid)
            if row is not None and row.tenant_id == tenant_id:
                del self._rows[cid]

    def delete_document_chunks(
        self, *, tenant_id: str, document_id: str, keep: Sequence[str] = ()
    ) -> None:
        require_tenant(tenant_id)
        keep_set = set(keep)
        for cid, row in list(self._rows.items()):
            if (
                row.tenant_id == tenant_id
                and row.document_id == document_id
                and cid not in keep_set
            ):
                del self._rows[cid]

    def delete_tenant(self, *, tenant_id: str) -> None:
        require_tenant(tenant_id)
        for cid in [cid for cid, row in self._rows.items() if row.tenant_id == tenant_id]:
            del self._rows[cid]

    def count(self, *, tenant_id: str) -> int:
        require_tenant(tenant_id)
        return sum(1 for r in self._rows.values() if r.tenant_id == tenant_id)

    def chunk_ids(self, *, tenant_id: str, document_id: str) -> set[str]:
        require_tenant(tenant_id)
        return {
            cid
            for cid, r in self._rows.items()
            if r.tenant_id == tenant_id and r.document_id == document_id
        }

    def flush(self) -> None:
        """Nothing to seal: every row is searched exactly as soon as it is written."""

    def ping(self) -> None:
        """Always answers: it lives in this process."""

    def update_fields(
        self, *, tenant_id: str, chunk_ids: Sequence[str], fields: Mapping[str, Any]
    ) -> None:
        require_tenant(tenant_id)
        unknown = set(fields) - UPDATABLE_FIELDS
        if unknown:
            raise ValueError(f"not updatable in place: {sorted(unknown)}")
        for cid in chunk_ids:
            row = self._rows.get(cid)
            if row is not None and row.tenant_id == tenant_id:
                self._rows[cid] = replace(
                    row,
                    source=str(fields.get("source", row.source)),
                    tags=tuple(fields.get("tags", row.tags)),
                    metadata=dict(fields.get("metadata", row.metadata)),
                )

    def tenant_chunk_ids(self, *, tenant_id: str) -> set[str]:
        require_tenant(tenant_id)
        return {cid for cid, row in self._rows.items() if row.tenant_id == tenant_id}

    async def search_dense(
        self,
        vector: Sequence[float],
        *,
        tenant_id: str,
        filter: FilterNode | None,
        limit: int,
        timeout: float,
    ) -> list[StoredHit]:
        def score(r: ChunkRecord) -> float:
            return sum(a * b for a, b in zip(vector, r.dense, strict=True))

        return await self._search(score, tenant_id=tenant_id, filter=filter, limit=limit)

    async def search_sparse(
        self,
        vector: SparseVector,
        *,
        tenant_id: str,
        filter: FilterNode | None,
        limit: int,
        timeout: float,
    ) -> list[StoredHit]:
        return await self._sparse(vector, tenant_id=tenant_id, filter=filter, limit=limit)

    async def texts(
        self, chunk_ids: Sequence[str], *, tenant_id: str, timeout: float
    ) -> dict[str, str]:
        require_tenant(tenant_id)
        await asyncio.sleep(0)  # a real suspension point, like a network call
        rows = (self._rows.get(cid) for cid in chunk_ids)
        return {r.chunk_id: r.text for r in rows if r is not None and r.tenant_id == tenant_id}

    async def chunk_fields(
        self, chunk_ids: Sequence[str], *, tenant_id: str, timeout: float
    ) -> dict[str, Mapping[str, Any]]:
        require_tenant(tenant_id)
        await asyncio.sleep(0)  # a real suspension point, like a network call
        rows = (self._rows.get(cid) for cid in chunk_ids)
        return {r.chunk_id: _fields(r) for r in rows if r is not None and r.tenant_id == tenant_id}

    async def sparse_terms(
        self, chunk_ids: Sequence[str], *, tenant_id: str, timeout: float
    ) -> dict[str, frozenset[int]]:
        require_tenant(tenant_id)
        await asyncio.sleep(0)  # a real suspension point, like a network call
        rows = (self._rows.get(cid) for cid in chunk_ids)
        return {
            r.chunk_id: frozenset(
                i for i, v in zip(r.sparse.indices, r.sparse.values, strict=True) if v > 0.0
            )
            for r in rows
            if r is not None and r.tenant_id == tenant_id
        }

    async def best_chunks(
        self,
        document_ids: Sequence[str],
        *,
        tenant_id: str,
        filter: FilterNode | None,
        vector: DenseVector | SparseVector | None,
        timeout: float,
    ) -> dict[str, StoredHit]:
        require_tenant(tenant_id)
        await asyncio.sleep(0)  # a real suspension point, like a network call
        wanted = set(document_ids)
        by_document: dict[str, list[StoredHit]] = {}
        for row in self._rows.values():
            if row.tenant_id != tenant_id or row.document_id not in wanted:
                continue
            fields = _fields(row)
            if matches(filter, fields):
                score = 0.0 if vector is None else _score(row, vector)
                by_document.setdefault(row.document_id, []).append(
                    StoredHit(row.chunk_id, score, fields)
                )
        sparse = isinstance(vector, SparseVector)
        return {
            document: best_of(hits, scored=vector is not None, sparse=sparse)
            for document, hits in by_document.items()
        }

    async def match_sparse(
        self,
        vector: SparseVector,
        *,
        tenant_id: str,
        filter: FilterNode | None,
        limit: int,
        fields: Sequence[str],
        timeout: float,
    ) -> list[StoredHit]:
        hits = await self._sparse(vector, tenant_id=tenant_id, filter=filter, limit=limit)
        keep = {PRIMARY_FIELD, *fields}
        return [
            StoredHit(h.chunk_id, h.score, {k: v for k, v in h.fields.items() if k in keep})
            for h in hits
        ]

    async def _sparse(
        self, vector: SparseVector, *, tenant_id: str, filter: FilterNode | None, limit: int
    ) -> list[StoredHit]:
        query = vector.to_dict()

        def score(r: ChunkRecord) -> float:
            return sum(
                query.get(i, 0.0) * v
                for i, v in zip(r.sparse.indices, r.sparse.values, strict=True)
            )

        if not query:
            return []
        return await self._search(
            score, tenant_id=tenant_id, filter=filter, limit=limit, positive_only=True
        )

    async def _search(
        self,
        score: Any,
        *,
        tenant_id: str,
        filter: FilterNode | None,
        limit: int,
        positive_only: bool = False,
    ) -> list[StoredHit]:
        require_tenant(tenant_id)
        await asyncio.sleep(0)  # a real suspension point, like a network call
        scored = []
        for row in self._rows.values():
            if row.tenant_id != tenant_id:
                continue
            s = float(score(row))
            if positive_only and s <= 0:
                continue  # an inverted index only finds rows sharing a term
            fields = _fields(row)
            if not matches(filter, fields):
                continue
            scored.append(StoredHit(chunk_id=row.chunk_id, score=s, fields=fields))
        scored.sort(key=lambda h: (-h.score, h.chunk_id))
        return scored[:limit]

    async def aclose(self) -> None:
        """No connections to release."""

    def close(self) -> None:
        self._rows.clear()


def _fields(row: ChunkRecord) -> dict[str, Any]:
    # Attribute by attribute: ``asdict`` copied the vectors too, for every row a search
    # scanned (2 s a search over Cranfield's 1,400 documents).
    data = {k: getattr(row, k) for k in CANDIDATE_FIELDS}
    data["tags"] = list(row.tags)
    data["metadata"] = copy.deepcopy(dict(row.metadata))
    return data


def _score(row: ChunkRecord, vector: DenseVector | SparseVector) -> float:
    if isinstance(vector, SparseVector):
        query = vector.to_dict()
        return sum(
            query.get(i, 0.0) * v
            for i, v in zip(row.sparse.indices, row.sparse.values, strict=True)
        )
    return sum(a * b for a, b in zip(vector, row.dense, strict=True))
