from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from hsearch_api.deps import ServicesDep

router = APIRouter(tags=["operations"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(services: ServicesDep) -> JSONResponse:
    """Readiness: the metadata database, Milvus and the encoder answer."""
    readiness = await services.check_readiness()
    return JSONResponse(
        status_code=200 if readiness.ready else 503,
        content={
            "status": "ready" if readiness.ready else "not_ready",
            "checks": {**readiness.checks, "encoder": readiness.encoder},
        },
    )
