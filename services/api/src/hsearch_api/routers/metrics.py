"""``/metrics``: Prometheus' scrape of every API process (and, on one machine, of the
workers sharing ``PROMETHEUS_MULTIPROC_DIR``); docs/metrics.md."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from hsearch.metrics.exposition import CONTENT_TYPE
from hsearch_api.deps import ServicesDep
from hsearch_api.schemas.errors import error_responses

router = APIRouter(tags=["operations"], responses=error_responses(500))


@router.get("/metrics", response_class=Response)
async def metrics(services: ServicesDep) -> Response:
    """Prometheus metrics (text exposition format); unauthenticated like the probes:
    its labels carry no query text and no tenant outside metrics.tenant_allow_list."""
    return Response(await services.exposition(), media_type=CONTENT_TYPE)
