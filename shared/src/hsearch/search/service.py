"""The query path: encode, run the legs in parallel under deadlines, fuse, shape.

A leg that errors or misses its deadline is reported in ``degraded`` and the other
leg's answer is returned; when every requested leg fails the search raises
:class:`~hsearch.errors.SearchUnavailableError` (503).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio.to_thread

from hsearch.config import SearchSettings
from hsearch.embedding.protocol import Embedder, Embedding, SparseKind
from hsearch.errors import BackendError, InvalidRequestError, SearchUnavailableError
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.rerank.protocol import Reranker
from hsearch.search.facets import compute_facets, validate_facet_requests
from hsearch.search.fusion import (
    FusedHit,
    LegHit,
    fuse_explained,
    script_coverage,
)
from hsearch.search.highlight import make_snippet
from hsearch.search.models import (
    Explanation,
    LegReport,
    SearchHit,
    SearchQuery,
    SearchResult,
)
from hsearch.search.ranking import rerank
from hsearch.types import MODE_LEGS, FusionMethod, Leg, LegStatus
from hsearch.vectorstore.filters import FilterNode, parse_filter
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
        statistics: LexicalStatistics,
        settings: SearchSettings,
        reranker: Reranker | None = None,
        rerank_depth: int = 50,
    ) -> None:
        self._embedder = embedder
        self._store = store
        self._statistics = statistics
        self._settings = settings
        self._reranker = reranker
        self._rerank_depth = rerank_depth

    # -- public ---------------------------------------------------------------

    async def search(self, query: SearchQuery) -> SearchResult:
        """Run ``query``; raises InvalidRequestError (422) or SearchUnavailableError (503)."""
        started = time.perf_counter()
        params = self._validate(query)
        embedding = await anyio.to_thread.run_sync(self._encode_query, query.tenant_id, query.query)
        outcomes = await self._run_legs(query, params, embedding)
        answered = {o.leg: o.hits for o in outcomes if o.hits is not None}
        if not answered:
            detail = "; ".join(f"{o.leg}: {o.report.error}" for o in outcomes)
            raise SearchUnavailableError(f"every search leg failed ({detail})")

        fields: dict[str, Mapping[str, Any]] = {}
        for hits in answered.values():
            for h in hits:
                fields.setdefault(h.chunk_id, h.fields)
        fused, weights, applied = self._fuse(query.query, answered, params)
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
        rerank_scores: dict[str, float] = {}
        rerank_ms: float | None = None
        if query.rerank:
            rerank_started = time.perf_counter()
            units, rerank_scores = await self._rerank(query.query, units, fields)
            rerank_ms = (time.perf_counter() - rerank_started) * 1000

        page_hits = tuple(
            self._to_hit(
                f,
                fields[f.id],
                params.method,
                matching=n,
                rerank_score=rerank_scores.get(f.id),
                snippet=make_snippet(str(fields[f.id].get("text", "")), query.query)
                if query.highlight
                else None,
            )
            for f, n in units[query.offset : query.offset + query.top_k]
        )
        result = SearchResult(
            query=query.query,
            mode=query.mode,
            method=params.method,
            hits=page_hits,
            total_candidates=len(units),
            facets=tuple(facets),
            offset=query.offset,
            top_k=query.top_k,
            degraded=tuple(o.leg for o in outcomes if o.hits is None),
            legs=tuple(o.report for o in outcomes),
            took_ms=(time.perf_counter() - started) * 1000,
            rerank_ms=rerank_ms,
            weights={Leg(leg): w for leg, w in weights.items()},
            applied_weights={Leg(leg): w for leg, w in applied.items()},
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

    async def _run_legs(
        self, query: SearchQuery, params: _Params, embedding: Embedding
    ) -> list[_LegOutcome]:
        runners: dict[Leg, Callable[[], Awaitable[list[StoredHit]]]] = {
            Leg.DENSE: lambda: self._store.search_dense(
                embedding.dense,
                tenant_id=query.tenant_id,
                filter=params.filter,
                limit=params.candidates,
                timeout=params.timeout,
            ),
            Leg.SPARSE: lambda: self._store.search_sparse(
                embedding.sparse,
                tenant_id=query.tenant_id,
                filter=params.filter,
                limit=params.candidates,
                timeout=params.timeout,
            ),
        }
        return list(
            await asyncio.gather(
                *(self._run_leg(leg, runners[leg], params.timeout) for leg in MODE_LEGS[query.mode])
            )
        )

    def _fuse(
        self, query: str, answered: Mapping[Leg, list[StoredHit]], params: _Params
    ) -> tuple[list[FusedHit], dict[str, float], dict[str, float]]:
        """Fuse the legs that answered; returns the hits, the weights the query was
        fused with (:func:`query_weights`) and those each leg carried in the end."""
        leg_hits = {
            leg.value: [LegHit(h.chunk_id, h.score) for h in hits] for leg, hits in answered.items()
        }
        weights = query_weights(
            query,
            leg_hits,
            configured={leg.value: w for leg, w in params.weights.items()},
            dense_scripts=self._embedder.info.dense_scripts,
            min_dense_script_coverage=self._settings.min_dense_script_coverage,
        )
        fused, applied = fuse_explained(
            leg_hits, method=params.method, weights=weights, k=params.rrf_k
        )
        return fused, weights, applied

    async def _rerank(
        self,
        query: str,
        units: list[tuple[FusedHit, int]],
        fields: Mapping[str, Mapping[str, Any]],
    ) -> tuple[list[tuple[FusedHit, int]], dict[str, float]]:
        """Rescore the best ``rerank_depth`` units with the cross-encoder; the rest keep
        their fused order behind them."""
        reranker = self._reranker
        if reranker is None:
            msg = "rerank: no reranker is configured on this server (HSEARCH_RERANK__MODEL_PATH)"
            raise InvalidRequestError(msg)
        head, tail = units[: self._rerank_depth], units[self._rerank_depth :]
        passages = [_passage(fields[f.id]) for f, _ in head]
        scores = await anyio.to_thread.run_sync(reranker.score, query, passages)
        ordered = rerank(head, scores)
        return [unit for unit, _ in ordered] + tail, {unit[0].id: score for unit, score in ordered}

    def _encode_query(self, tenant_id: str, text: str) -> Embedding:
        # Encoding is tenant-independent; term counts then get the tenant's IDF (BM25 as
        # an inner product: the query side carries the IDF) as a step of its own.
        embedding = self._embedder.embed_query(text)
        if self._embedder.info.sparse_kind is not SparseKind.TERM_FREQUENCY:
            return embedding
        sparse = self._statistics.weigh_query(tenant_id, embedding.sparse)
        return Embedding(dense=embedding.dense, sparse=sparse)

    async def _run_leg(
        self, leg: Leg, run: Callable[[], Awaitable[list[StoredHit]]], timeout: float
    ) -> _LegOutcome:
        started = time.perf_counter()
        try:
            hits = await asyncio.wait_for(run(), timeout + DEADLINE_MARGIN_S)
        except TimeoutError:
            status, error = LegStatus.TIMEOUT, f"no answer within {timeout:.3f}s"
        except BackendError as exc:  # a failing backend degrades the leg, not the request
            status, error = LegStatus.ERROR, f"{type(exc).__name__}: {exc.message}"
        else:
            took = (time.perf_counter() - started) * 1000
            return _LegOutcome(leg, hits, LegReport(leg, LegStatus.OK, took, len(hits)))
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
        rerank_score: float | None,
        snippet: str | None,
    ) -> SearchHit:
        return SearchHit(
            chunk_id=fused.id,
            document_id=str(fields.get("document_id", "")),
            external_id=str(fields.get("external_id", "")),
            title=str(fields.get("title", "")),
            text=str(fields.get("text", "")),
            score=fused.score if rerank_score is None else rerank_score,
            explanation=Explanation(
                method=method,
                fused_score=fused.score,
                dense_rank=fused.ranks.get(Leg.DENSE.value),
                sparse_rank=fused.ranks.get(Leg.SPARSE.value),
                dense_score=fused.scores.get(Leg.DENSE.value),
                sparse_score=fused.scores.get(Leg.SPARSE.value),
                rerank_score=rerank_score,
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
        # Parsed once here; both legs get the tree. InvalidFilterError names the part.
        filter = parse_filter(query.filter)
        validate_facet_requests(query.facets)
        method = query.fusion or s.fusion
        weights = dict(query.weights) if query.weights else s.default_weights(method)
        for leg, weight in weights.items():
            if not (math.isfinite(weight) and 0.0 <= weight <= 1.0):
                raise InvalidRequestError(f"weights.{leg}: must be between 0 and 1")
        if not any(weights.get(leg, 0.0) > 0 for leg in MODE_LEGS[query.mode]):
            raise InvalidRequestError(
                f"weights: at least one leg of mode {query.mode.value!r} needs a weight above 0"
            )
        return _Params(
            candidates=candidates,
            timeout=timeout,
            method=method,
            weights=weights,
            rrf_k=query.rrf_k or s.rrf_k,
            filter=filter,
        )


@dataclass(frozen=True, slots=True)
class _Params:
    candidates: int
    timeout: float
    method: FusionMethod
    weights: dict[Leg, float]
    rrf_k: int
    filter: FilterNode | None


def query_weights(
    query: str,
    legs: Mapping[str, Sequence[LegHit]],
    *,
    configured: Mapping[str, float],
    dense_scripts: Collection[str] | None,
    min_dense_script_coverage: float,
) -> dict[str, float]:
    """The weights one query is fused with, for the legs that answered (``legs``).

    Pure, so that the relevance benchmark's replay (``bench.fusion_replay``) fuses with
    exactly the service's rule:

    * a degraded leg is absent from ``legs`` and drops out of the weights; the legs that
      answered keep their configured weights;
    * coverage: when the dense encoder declares the scripts it reads and fewer than
      ``min_dense_script_coverage`` of the query's words are in them, the dense leg
      gets weight 0 (its ranking is noise), provided the sparse leg found something;
    * fallback: when no leg that answered keeps a positive weight, they all get 1, so a
      query never comes back empty because of a weight.
    """
    weights = {leg: configured.get(leg, 0.0) for leg in legs}
    if (
        dense_scripts is not None
        and legs.get(Leg.DENSE.value)
        and legs.get(Leg.SPARSE.value)
        and script_coverage(query, scripts=dense_scripts) < min_dense_script_coverage
    ):
        # The dense encoder does not read this query's language (e.g. an English-only
        # model on Japanese): its ranking is noise, so only the sparse leg counts.
        weights[Leg.DENSE.value] = 0.0
    if not any(w > 0 for w in weights.values()):
        weights = dict.fromkeys(legs, 1.0)  # the only weighted leg degraded
    return weights


def _passage(fields: Mapping[str, Any]) -> str:
    title = str(fields.get("title", ""))
    text = str(fields.get("text", ""))
    return f"{title}\n{text}" if title else text


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
