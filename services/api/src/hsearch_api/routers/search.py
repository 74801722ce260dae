"""``POST /v1/search``.

No ``from __future__ import annotations`` here: the route is defined in
:func:`create_router` with the request model built there, and FastAPI resolves string
annotations in the module's globals, where that model is not.
"""

from collections.abc import Sequence
from dataclasses import asdict

from fastapi import APIRouter

from hsearch.config import SearchSettings
from hsearch.errors import FieldError, InvalidRequestError
from hsearch.lexical.additions import TermExpansion
from hsearch.search.facets import parse_facet_requests
from hsearch.search.models import SearchQuery, SearchResult
from hsearch.search.service import SearchService
from hsearch.search.sorting import parse_sort
from hsearch.types import TotalTracking
from hsearch_api.deps import Caller, SearchCallerDep, SearchServiceDep
from hsearch_api.limits import SearchSlotDep
from hsearch_api.schemas.errors import COMMON_ERRORS, error_responses
from hsearch_api.schemas.search import (
    ExplanationRead,
    FacetBasisRead,
    FacetBucketRead,
    FacetRead,
    HitRead,
    LegRead,
    LegScoreRead,
    LinkedPageRead,
    SearchRequest,
    SearchResponse,
    SortClauseRead,
    SortRead,
    TermMatchRead,
    TimingsRead,
    search_request_model,
    search_response_model,
)


def create_router(settings: SearchSettings, *, legs: Sequence[str]) -> APIRouter:
    """The search routes, validating requests against the limits in ``settings``, with
    the registered sources' names (``legs``) in the OpenAPI document."""
    request_model = search_request_model(settings, legs)
    router = APIRouter(prefix="/v1", tags=["search"], responses=COMMON_ERRORS)

    @router.post(
        "/search", responses=error_responses(413), response_model=search_response_model(legs)
    )
    async def search(
        body: request_model,  # type: ignore[valid-type]  # a model built at run time
        caller: SearchCallerDep,
        service: SearchServiceDep,
        _slot: SearchSlotDep,  # after the credential: a refused one takes no slot
    ) -> SearchResponse:
        """Hybrid search: dense and sparse legs in parallel under deadlines, fused."""
        return await run_search(body, caller=caller, service=service)

    return router


async def run_search(
    body: SearchRequest, *, caller: Caller, service: SearchService
) -> SearchResponse:
    """Map the request onto a query, run it, map the result."""
    if body.cursor is not None and "offset" in body.model_fields_set:
        # A cursor carries its own offset: with both, which page was meant is unknown.
        raise InvalidRequestError.of(
            [
                FieldError("offset", "send either offset or cursor (a cursor holds its offset)"),
                FieldError("cursor", "send either cursor or offset (a cursor holds its offset)"),
            ]
        )
    result = await service.search(
        SearchQuery(
            tenant_id=caller.tenant_id,
            required_filter=caller.restriction,
            max_top_k=caller.max_top_k,
            query=body.query,
            top_k=body.top_k,
            offset=body.offset,
            mode=body.mode,
            fusion=body.fusion,
            rrf_k=body.rrf_k,
            weights=body.weights,
            filter=body.filter,
            candidates=body.candidates,
            leg_timeout_s=body.leg_timeout_ms / 1000 if body.leg_timeout_ms else None,
            min_score=body.min_score,
            group_by_document=body.group_by_document,
            highlight=body.highlight,
            track_total=TotalTracking.of(body.track_total),
            typo_tolerance=body.typo_tolerance,
            prefix=body.prefix,
            rerank=body.rerank,
            facets=parse_facet_requests(body.facets),
            facet_unit=body.facet_unit,
            cursor=body.cursor,
            sort=parse_sort(body.sort),
            leg_params=None if body.graph is None else {"graph": body.graph},
            include_linked=body.include_linked,
        )
    )
    return search_response(result)


def search_response(result: SearchResult) -> SearchResponse:
    return SearchResponse(
        query=result.query,
        mode=result.mode,
        method=result.method,
        offset=result.offset,
        top_k=result.top_k,
        total=result.totals.total,
        total_exact=result.totals.exact,
        total_relation=result.totals.relation,
        total_basis=result.totals.scope,
        window=result.window,
        total_candidates=result.window,
        degraded=list(result.degraded),
        legs=[
            LegRead(
                leg=r.leg,
                status=r.status,
                took_ms=r.took_ms,
                candidates=r.candidates,
                error=r.error,
            )
            for r in result.legs
        ],
        took_ms=result.took_ms,
        rerank_ms=result.rerank_ms,
        timings=TimingsRead(**asdict(result.timings)),
        cached=result.cached,
        next_cursor=result.next_cursor,
        weights=result.weights,
        applied_weights=result.applied_weights,
        keyword_coverage=result.keyword_coverage,
        facets=[
            FacetRead(
                field=f.field,
                buckets=[
                    FacetBucketRead(value=b.value, count=b.count, from_=b.from_, to=b.to)
                    for b in f.buckets
                ],
                missing=f.missing,
                other=f.other,
            )
            for f in result.facets
        ],
        facet_basis=None
        if result.facet_basis is None
        else FacetBasisRead(**asdict(result.facet_basis)),
        expansions=[term_match(e) for e in result.expansions],
        sort=None
        if not result.sort
        else SortRead(
            by=[SortClauseRead(field=c.field, order=c.order) for c in result.sort],
            basis="window",
            window=result.window,
        ),
        hits=[
            HitRead(
                chunk_id=h.chunk_id,
                document_id=h.document_id,
                external_id=h.external_id,
                title=h.title,
                text=h.text,
                char_start=h.char_start,
                char_end=h.char_end,
                snippet=h.snippet,
                score=h.score,
                matching_chunks=h.matching_chunks,
                source=h.source,
                lang=h.lang,
                tags=list(h.tags),
                metadata=h.metadata,
                explanation=ExplanationRead(
                    method=h.explanation.method,
                    fused_score=h.explanation.fused_score,
                    legs={
                        name: LegScoreRead(
                            rank=leg.rank,
                            score=leg.score,
                            detail=None if leg.detail is None else dict(leg.detail),
                        )
                        for name, leg in h.explanation.legs.items()
                    },
                    dense_rank=h.explanation.rank_of("dense"),
                    sparse_rank=h.explanation.rank_of("sparse"),
                    dense_score=h.explanation.score_of("dense"),
                    sparse_score=h.explanation.score_of("sparse"),
                    rerank_score=h.explanation.rerank_score,
                    matches=[term_match(m) for m in h.explanation.matches],
                ),
                linked_pages=None
                if h.linked_pages is None
                else [
                    LinkedPageRead(
                        external_id=p.external_id, title=p.title, type=p.type, direction=p.direction
                    )
                    for p in h.linked_pages
                ],
            )
            for h in result.hits
        ],
    )


def term_match(expansion: TermExpansion) -> TermMatchRead:
    return TermMatchRead(
        query=expansion.query,
        matched=expansion.matched,
        kind=expansion.kind.value,
        typos=expansion.typos,
    )
