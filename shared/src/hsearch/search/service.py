"""The query path: encode, run the legs in parallel under deadlines, fuse, shape.

A leg that errors or misses its deadline is reported in ``degraded`` and the other
leg's answer is returned; when every requested leg fails the search raises
:class:`~hsearch.errors.SearchUnavailableError` (503).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import SearchSettings
from hsearch.db.repositories.lexical import LexicalStatsRepository
from hsearch.embedding.bm25 import bm25_query_weights
from hsearch.embedding.protocol import Embedder, Embedding, SparseKind
from hsearch.errors import BackendError, InvalidRequestError, SearchUnavailableError
from hsearch.search.facets import compute_facets, validate_facet_requests
from hsearch.search.filters import parse_filter
from hsearch.search.fusion import DEFAULT_METHOD, FusedHit, FusionMethod, LegHit, fuse
from hsearch.search.highlight import make_snippet
from hsearch.search.models import (
    MODE_LEGS,
    Explanation,
    Leg,
    LegReport,
    SearchHit,
    SearchQuery,
    SearchResult,
)
from hsearch.vectorstore.protocol import StoredHit, VectorStore

logger = logging.getLogger(__name__)

# Extra time granted past a leg's deadline for the cancellation to land.
DEADLINE_MARGIN_S = 0.05


@dataclass(frozen=True, slots=True)
class _LegOutcome:
    leg: Leg
    hits: list[StoredHit] | None
    report: LegReport


class SearchService:
    def __init__(
        self,
        *,
        embedder: Embedder,
        store: VectorStore,
        session_factory: sessionmaker[Session],
        settings: SearchSettings,
    ) -> None:
        self._embedder = embedder
        self._store = store
        self._sessions = session_factory
        self._settings = settings

    # -- public ---------------------------------------------------------------

    async def search(self, query: SearchQuery) -> SearchResult:
        started = time.perf_counter()
        params = self._validate(query)
        legs = MODE_LEGS[query.mode]
        embedding = await anyio.to_thread.run_sync(self._encode_query, query.tenant_id, query.query)

        runners: dict[Leg, Callable[[], Awaitable[list[StoredHit]]]] = {
            Leg.DENSE: lambda: self._store.search_dense(
                embedding.dense,
                tenant_id=query.tenant_id,
                filter=query.filter,
                limit=params.candidates,
                timeout=params.timeout,
            ),
            Leg.SPARSE: lambda: self._store.search_sparse(
                embedding.sparse,
                tenant_id=query.tenant_id,
                filter=query.filter,
                limit=params.candidates,
                timeout=params.timeout,
            ),
        }
        outcomes = await asyncio.gather(
            *(self._run_leg(leg, runners[leg], params.timeout) for leg in legs)
        )
        answered = {o.leg: o.hits for o in outcomes if o.hits is not None}
        if not answered:
            detail = "; ".join(f"{o.leg}: {o.report.error}" for o in outcomes)
            raise SearchUnavailableError(f"every search leg failed ({detail})")

        fields: dict[str, Mapping[str, Any]] = {}
        leg_hits: dict[str, list[LegHit]] = {}
        for leg, hits in answered.items():
            leg_hits[leg.value] = [LegHit(h.chunk_id, h.score) for h in hits]
            for h in hits:
                fields.setdefault(h.chunk_id, h.fields)
        weights = {leg: w for leg, w in params.weights.items() if leg in leg_hits}
        if not any(w > 0 for w in weights.values()):
            weights = dict.fromkeys(leg_hits, 1.0)
        fused = fuse(leg_hits, method=params.method, weights=weights, k=params.rrf_k)
        if query.min_score is not None:
            fused = [f for f in fused if f.score >= query.min_score]
        units = (
            _group_by_document(fused, fields)
            if query.group_by_document
            else [(f, 1) for f in fused]
        )
        facets = (
            compute_facets(
                [fields[f.id] for f in fused],
                query.facets,
                group_by_document=query.group_by_document,
            )
            if query.facets
            else []
        )
        page = units[query.offset : query.offset + query.top_k]
        page_hits = tuple(
            self._to_hit(
                f,
                fields[f.id],
                params.method,
                matching=n,
                snippet=make_snippet(str(fields[f.id].get("text", "")), query.query)
                if query.highlight
                else None,
            )
            for f, n in page
        )
        result = SearchResult(
            query=query.query,
            mode=query.mode,
            method=params.method.value,
            hits=page_hits,
            total_candidates=len(units),
            facets=tuple(facets),
            offset=query.offset,
            top_k=query.top_k,
            degraded=tuple(o.leg for o in outcomes if o.hits is None),
            legs=tuple(o.report for o in outcomes),
            took_ms=(time.perf_counter() - started) * 1000,
        )
        logger.info(
            "search.done tenant=%s mode=%s hits=%d degraded=%s took_ms=%.1f",
            query.tenant_id,
            query.mode,
            len(page_hits),
            ",".join(result.degraded) or "-",
            result.took_ms,
        )
        return result

    # -- steps ----------------------------------------------------------------

    def _encode_query(self, tenant_id: str, text: str) -> Embedding:
        embedding = self._embedder.embed_query(text)
        if self._embedder.info.sparse_kind is not SparseKind.TERM_FREQUENCY:
            return embedding
        # BM25 as an inner product: the query side carries the tenant's IDF.
        with self._sessions() as session:
            repo = LexicalStatsRepository(session)
            n_chunks, _ = repo.corpus(tenant_id)
            dfs = repo.document_frequencies(tenant_id, embedding.sparse.indices)
        sparse = bm25_query_weights(
            embedding.sparse, document_frequencies=dfs, document_count=max(n_chunks, 1)
        )
        return Embedding(dense=embedding.dense, sparse=sparse)

    async def _run_leg(
        self, leg: Leg, run: Callable[[], Awaitable[list[StoredHit]]], timeout: float
    ) -> _LegOutcome:
        started = time.perf_counter()
        try:
            hits = await asyncio.wait_for(run(), timeout + DEADLINE_MARGIN_S)
        except TimeoutError:
            status, error = "timeout", f"no answer within {timeout:.3f}s"
        except BackendError as exc:  # a failing backend degrades the leg, not the request
            status, error = "error", f"{type(exc).__name__}: {exc.message}"
        else:
            took = (time.perf_counter() - started) * 1000
            return _LegOutcome(leg, hits, LegReport(leg, "ok", took, len(hits)))
        took = (time.perf_counter() - started) * 1000
        logger.warning("search.leg.degraded leg=%s status=%s error=%s", leg, status, error)
        return _LegOutcome(leg, None, LegReport(leg, status, took, 0, error))

    @staticmethod
    def _to_hit(
        fused: FusedHit,
        fields: Mapping[str, Any],
        method: FusionMethod,
        *,
        matching: int,
        snippet: str | None,
    ) -> SearchHit:
        return SearchHit(
            chunk_id=fused.id,
            document_id=str(fields.get("document_id", "")),
            external_id=str(fields.get("external_id", "")),
            title=str(fields.get("title", "")),
            text=str(fields.get("text", "")),
            score=fused.score,
            explanation=Explanation(
                method=method.value,
                fused_score=fused.score,
                dense_rank=fused.ranks.get(Leg.DENSE.value),
                sparse_rank=fused.ranks.get(Leg.SPARSE.value),
                dense_score=fused.scores.get(Leg.DENSE.value),
                sparse_score=fused.scores.get(Leg.SPARSE.value),
            ),
            snippet=snippet,
            matching_chunks=matching,
            source=str(fields.get("source", "")),
            lang=str(fields.get("lang", "")),
            tags=tuple(fields.get("tags") or ()),
            metadata=dict(fields.get("metadata") or {}),
        )

    # -- validation -----------------------------------------------------------

    def _validate(self, query: SearchQuery) -> _Params:
        s = self._settings
        if not query.query.strip():
            raise InvalidRequestError("query: must not be empty")
        if not 1 <= query.top_k <= s.max_top_k:
            raise InvalidRequestError(f"top_k: must be between 1 and {s.max_top_k}")
        if query.offset < 0:
            raise InvalidRequestError("offset: must be >= 0")
        # The candidate depth must not depend on the offset: every page of a query is
        # then cut from the same fused list, so pages neither repeat nor skip hits.
        candidates = query.candidates or min(
            s.max_candidates, max(s.min_candidates, s.candidates_factor * query.top_k)
        )
        if not query.top_k <= candidates <= s.max_candidates:
            raise InvalidRequestError(
                f"candidates: must be between top_k ({query.top_k}) and {s.max_candidates}"
            )
        timeout = query.leg_timeout_s or s.leg_timeout_s
        if not 0 < timeout <= s.max_leg_timeout_s:
            raise InvalidRequestError(
                f"leg_timeout_ms: must be in (0, {int(s.max_leg_timeout_s * 1000)}]"
            )
        parse_filter(query.filter)  # InvalidFilterError names the offending part
        validate_facet_requests(query.facets)
        try:
            method = FusionMethod(query.fusion) if query.fusion else DEFAULT_METHOD
        except ValueError:
            allowed = ", ".join(m.value for m in FusionMethod)
            raise InvalidRequestError(f"fusion: must be one of {allowed}") from None
        weights = (
            dict(query.weights)
            if query.weights
            else {
                Leg.DENSE.value: s.dense_weight,
                Leg.SPARSE.value: s.sparse_weight,
            }
        )
        unknown = set(weights) - {leg.value for leg in Leg}
        if unknown:
            raise InvalidRequestError(
                f"weights: unknown leg(s) {sorted(unknown)}; allowed: dense, sparse"
            )
        return _Params(
            candidates=candidates,
            timeout=timeout,
            method=method,
            weights=weights,
            rrf_k=query.rrf_k or s.rrf_k,
        )


@dataclass(frozen=True, slots=True)
class _Params:
    candidates: int
    timeout: float
    method: FusionMethod
    weights: dict[str, float]
    rrf_k: int


def _group_by_document(
    fused: Sequence[FusedHit], fields: Mapping[str, Mapping[str, Any]]
) -> list[tuple[FusedHit, int]]:
    """One entry per document: its best chunk (fused order) and how many matched."""
    best: dict[str, FusedHit] = {}
    counts: dict[str, int] = {}
    for hit in fused:
        doc = str(fields[hit.id].get("document_id", hit.id))
        best.setdefault(doc, hit)
        counts[doc] = counts.get(doc, 0) + 1
    return [(hit, counts[doc]) for doc, hit in best.items()]
