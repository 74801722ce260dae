from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from hsearch_api.deps import ServicesDep

router = APIRouter(tags=["operations"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(services: ServicesDep) -> JSONResponse:
    """Readiness: the metadata database, Milvus and the encoder answer."""
    checks: dict[str, Any] = {}

    def _db() -> None:
        with services.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    for name, probe in (("database", _db), ("milvus", services.store.ping)):
        try:
            await anyio.to_thread.run_sync(probe)
            checks[name] = "ok"
        except Exception as exc:  # readiness reports, it never raises
            checks[name] = f"error: {type(exc).__name__}: {exc}"
    checks["encoder"] = services.embedder.info.fingerprint
    ready = all(v == "ok" for k, v in checks.items() if k != "encoder")
    return JSONResponse(
        status_code=200 if ready else 503,
        content={"status": "ready" if ready else "not_ready", "checks": checks},
    )
