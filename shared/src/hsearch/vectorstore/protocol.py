"""The vector store contract: what ingestion writes and what the search legs read."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hsearch.embedding.protocol import EncoderInfo
from hsearch.errors import HsearchError
from hsearch.types import DenseVector, SparseVector
from hsearch.vectorstore.filters import FilterNode


def answered() -> None:
    """The wait :meth:`VectorStore.send_upsert` returns for a write already answered (or
    nothing to write)."""


def require_tenant(tenant_id: object) -> str:
    """``tenant_id`` if it names a tenant; raises HsearchError (500: a bug, never a
    request's fault) for an empty or non-string one, so that no store call acts on
    every tenant for want of a condition."""
    if not isinstance(tenant_id, str) or not tenant_id:
        msg = f"a vector store call must name a tenant, got {tenant_id!r}"
        raise HsearchError(msg)
    return tenant_id


def best_of(chunks: Sequence[StoredHit], *, scored: bool, sparse: bool) -> StoredHit:
    """The rule of :meth:`VectorStore.best_chunks` for one document's ``chunks`` (at
    least one, each scored for the vector and carrying its ``ordinal`` field): the best
    score (the earlier ordinal on a tie), or the first chunk, with score 0, when nothing
    was ``scored`` (no vector) or, for a ``sparse`` vector, no chunk scores above 0."""

    def ordinal(hit: StoredHit) -> int:
        return int(hit.fields.get("ordinal") or 0)

    first = min(chunks, key=ordinal)
    if not scored:
        return StoredHit(first.chunk_id, 0.0, first.fields)
    best = max(chunks, key=lambda hit: (hit.score, -ordinal(hit)))
    if sparse and best.score <= 0:
        return StoredHit(first.chunk_id, 0.0, first.fields)
    return best


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """One chunk as stored: ids, text, filter/facet fields and both vectors.

    ``char_start`` and ``char_end`` locate the chunk in its document's text:
    ``document.text[char_start:char_end] == text`` (Unicode code points)."""

    chunk_id: str
    document_id: str
    tenant_id: str
    external_id: str
    title: str
    text: str
    ordinal: int
    dense: DenseVector
    sparse: SparseVector
    char_start: int = 0
    char_end: int = 0
    source: str = ""
    lang: str = ""
    tags: tuple[str, ...] = ()
    created_at: int = 0
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StoredHit:
    """One search-leg hit: the chunk id, the leg's raw score and the stored fields
    (a leg's candidates carry :data:`~hsearch.vectorstore.schema.CANDIDATE_FIELDS`: all
    but the text)."""

    chunk_id: str
    score: float
    fields: Mapping[str, Any]
    detail: Mapping[str, Any] | None = None
    """How a leg that is not a store's found it, for the hit's explanation (the graph
    leg: the path from a seed); JSON values."""


class VectorStore(Protocol):
    """Writes are synchronous (workers); the search legs are coroutines (API).

    A leg's ``filter`` is the tree :func:`~hsearch.vectorstore.filters.parse_filter`
    built from the request (``None``: no filter); a store renders or evaluates it, and
    always restricts the search to ``tenant_id`` as well.

    Every call that reads, changes or deletes stored chunks names the tenant
    (``tenant_id``; :meth:`upsert`: each record's), and a store raises
    :class:`~hsearch.errors.HsearchError` on an empty one rather than act on every
    tenant: fail closed.

    Lifecycle: :meth:`ensure_collection` once at start, :meth:`ping` for readiness,
    :meth:`aclose` on the event loop that ran the searches, then :meth:`close`.

    Rebuilding (``hsearch reindex``): :meth:`new_collection` makes an empty collection
    beside the live one and a store that writes to it; searches and writes through this
    store keep going to the live collection until :meth:`swap_in` makes the new one live
    in one step; :meth:`drop_previous` then drops the old one.
    """

    def ensure_collection(self, encoder: EncoderInfo) -> None:
        """Create the collection for ``encoder`` or verify the existing one was built
        with it (:class:`~hsearch.errors.EncoderMismatchError`, naming ``hsearch
        reindex``, otherwise)."""
        ...

    def new_collection(self, encoder: EncoderInfo) -> VectorStore:
        """A store on a new, empty collection built for ``encoder``, beside the live one
        (which it leaves as it is); :meth:`swap_in` makes it live."""
        ...

    def swap_in(self, built: VectorStore) -> str | None:
        """Make ``built`` (from :meth:`new_collection`) the live collection in one step:
        searches and writes through this store go to it from now on. Returns the name of
        the previous collection (``None``: there was none), which is kept until
        :meth:`drop_previous`."""
        ...

    def drop_previous(self, name: str) -> None:
        """Drop ``name``, a collection :meth:`swap_in` replaced (never the live one)."""
        ...

    def live_collection(self) -> str | None:
        """The name of the collection searches go to now (``None``: none yet)."""
        ...

    def upsert(self, records: Sequence[ChunkRecord]) -> None: ...

    def send_upsert(self, records: Sequence[ChunkRecord]) -> Callable[[], None]:
        """Start :meth:`upsert` of ``records``; returns a function that waits for the
        store's answer and raises what :meth:`upsert` would have. The caller may send
        the next records before it waits (the indexer prepares a group's write while the
        store writes the group before), but writes sent and not answered may be applied
        in any order: records of a chunk id are sent again only once the earlier write
        of it is answered."""
        ...

    def update_fields(
        self, *, tenant_id: str, chunk_ids: Sequence[str], fields: Mapping[str, Any]
    ) -> None:
        """Set ``fields`` (``source``, ``tags``, ``metadata``) on the tenant's chunks,
        leaving their text and vectors as they are (no re-encoding)."""
        ...

    def delete_chunks(self, chunk_ids: Sequence[str], *, tenant_id: str) -> None:
        """Delete the tenant's chunks by primary key (cheap at any collection size).

        Every call names the tenant, like every other call here, and a store refuses
        one that names none (fail closed). Milvus deletes by primary key alone (a
        tenant condition would turn the key lookup into a scan of the partition): a
        chunk id is a hash of its document id, itself a UUIDv5 of the tenant and the
        external id, so no id of one tenant is another's."""
        ...

    def delete_document_chunks(
        self, *, tenant_id: str, document_id: str, keep: Sequence[str] = ()
    ) -> None:
        """Delete the document's chunks except the ids in ``keep`` (a filtered scan)."""
        ...

    def delete_tenant(self, *, tenant_id: str) -> None:
        """Delete every chunk of the tenant (by the tenant condition: in Milvus, the
        tenant is the partition key, so this touches the tenant's partition only)."""
        ...

    def count(self, *, tenant_id: str) -> int: ...

    def chunk_ids(self, *, tenant_id: str, document_id: str) -> set[str]: ...

    def tenant_chunk_ids(self, *, tenant_id: str) -> set[str]:
        """Every chunk id the tenant has in the store (read in batches)."""
        ...

    def flush(self) -> None:
        """Make the writes so far fast to search (Milvus: seal the growing segments,
        which are searched brute force, 10-40x slower than indexed ones). Writes are
        searchable without it; call it after a batch of writes, not after each."""
        ...

    def ping(self) -> None:
        """Return when the store answers; raise
        :class:`~hsearch.errors.VectorStoreError` when it does not (readiness)."""
        ...

    async def search_dense(
        self,
        vector: Sequence[float],
        *,
        tenant_id: str,
        filter: FilterNode | None,
        limit: int,
        timeout: float,
    ) -> list[StoredHit]: ...

    async def search_sparse(
        self,
        vector: SparseVector,
        *,
        tenant_id: str,
        filter: FilterNode | None,
        limit: int,
        timeout: float,
    ) -> list[StoredHit]: ...

    async def texts(
        self, chunk_ids: Sequence[str], *, tenant_id: str, timeout: float
    ) -> dict[str, str]:
        """The text of each of ``chunk_ids`` the tenant holds (a chunk deleted since, or
        another tenant's, is left out). The legs return their candidates without it."""
        ...

    async def chunk_fields(
        self, chunk_ids: Sequence[str], *, tenant_id: str, timeout: float
    ) -> dict[str, Mapping[str, Any]]:
        """The stored fields (:data:`~hsearch.vectorstore.schema.CANDIDATE_FIELDS`: no
        text, no vectors) of each of ``chunk_ids`` the tenant holds, by primary key (a
        chunk deleted since, or another tenant's, is left out): what a source that
        returns bare chunk ids is hydrated with."""
        ...

    async def sparse_terms(
        self, chunk_ids: Sequence[str], *, tenant_id: str, timeout: float
    ) -> dict[str, frozenset[int]]:
        """The terms (sparse-vector indices with a weight above 0) each of ``chunk_ids``
        the tenant holds is stored with, by primary key (a chunk deleted since, or
        another tenant's, is left out): what the keyword leg's coverage of the query is
        read from (:mod:`hsearch.lexical.coverage`)."""
        ...

    async def best_chunks(
        self,
        document_ids: Sequence[str],
        *,
        tenant_id: str,
        filter: FilterNode | None,
        vector: DenseVector | SparseVector | None,
        timeout: float,
    ) -> dict[str, StoredHit]:
        """Each of the tenant's ``document_ids`` with its chunk that scores best for
        ``vector`` (inner product) among its chunks under ``filter``: its first chunk (by
        ordinal) when ``vector`` is ``None`` or no chunk of it scores above 0 for a
        sparse one. A document none of whose chunks passes ``filter`` is left out. Each
        hit carries the candidate fields and the chunk's score (0 without a vector)."""
        ...

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
        """Every chunk of the tenant holding a term of ``vector`` under ``filter``, best
        first, up to ``limit``: what a keyword query matches, for totals and facets.
        Each hit carries the chunk id and only ``fields`` (no text, no vectors)."""
        ...

    async def aclose(self) -> None:
        """Release what the search legs opened on the running event loop (connections
        bound to it); the store stays usable, a later search opens them again."""
        ...

    def close(self) -> None:
        """Release the synchronous connection; the store is unusable afterwards."""
        ...
