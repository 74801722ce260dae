"""Bodies of the probes (``/healthz``, ``/readyz``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ComponentRead(BaseModel):
    status: str = Field(description="`ok`, `error` or `timeout`.")
    required: bool = Field(description="Whether the process can serve without it.")
    latency_ms: float | None
    detail: str | None


class ReadinessRead(BaseModel):
    """The readiness report: the same body with 200 (ready) and 503 (not ready), the one
    5xx that is not an error body, since a probe's caller wants the report."""

    status: str = Field(
        description="`ready`, `degraded` (an optional component is down) or `not_ready`."
    )
    components: dict[str, ComponentRead]
    checks: dict[str, str] = Field(
        description="Deprecated: the flat form of `components`.",
        json_schema_extra={"deprecated": True},
    )


class LivenessRead(BaseModel):
    status: str
