from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from hsearch_api.deps import ServicesDep
from hsearch_api.schemas.errors import error_responses
from hsearch_api.schemas.health import LivenessRead, ReadinessRead

router = APIRouter(tags=["operations"], responses=error_responses(500))


@router.get("/healthz", response_model=LivenessRead)
def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=ReadinessRead,
    responses={503: {"model": ReadinessRead, "description": "Not ready: the same report."}},
)
async def readyz(services: ServicesDep) -> JSONResponse:
    """Readiness: 503 unless the metadata database, the vector store and the encoder
    answer; a broker that does not is reported as degraded (200), since searches do
    not need it."""
    readiness = await services.check_readiness()
    components = readiness.components
    return JSONResponse(
        status_code=200 if readiness.ready else 503,
        content={
            "status": readiness.status,
            "components": {
                name: {
                    "status": c.status,
                    "required": c.required,
                    "latency_ms": c.latency_ms,
                    "detail": c.detail,
                }
                for name, c in components.items()
            },
            # The flat form earlier versions answered with, kept for existing probes.
            "checks": {
                name: (c.detail or "") if name == "encoder" else _flat(c.status, c.detail)
                for name, c in components.items()
            },
        },
    )


def _flat(status: str, detail: str | None) -> str:
    return "ok" if status == "ok" else f"{status}: {detail}"
