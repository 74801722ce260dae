"""Bodies of the built-in pages' JSON endpoints (``/ops/...``; docs/operations.md, Pages)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from hsearch.types import TenantStatus


class LoginRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: SecretStr = Field(description="An operator credential (hso_...).")


class SessionRead(BaseModel):
    operator: str = Field(description="The credential's public prefix.")
    expires_in_s: int


class TenantOptionRead(BaseModel):
    id: str
    name: str
    status: TenantStatus


class LegHistogramRead(BaseModel):
    buckets: list[tuple[float | None, float]] = Field(
        description="(upper bound in seconds, cumulative count); null is +Inf."
    )
    count: float
    sum_s: float


class PastLegRead(BaseModel):
    buckets: list[tuple[float | None, float]] = Field(
        description="(upper bound in seconds, cumulative count); null is +Inf."
    )


class PastReadingRead(BaseModel):
    """A snapshot of the search totals kept by the server (the stats window): what the
    page draws on opening, before readings of its own."""

    at: float
    searches: dict[str, float]
    legs: dict[str, PastLegRead]
    leg_outcomes: dict[str, dict[str, float]]
    cache: dict[str, dict[str, float]]


class DashboardRead(BaseModel):
    """Totals since the stack started, over every process; the page makes rates of two
    successive readings."""

    at: float
    searches: dict[str, float]
    legs: dict[str, LegHistogramRead]
    leg_outcomes: dict[str, dict[str, float]]
    cache: dict[str, dict[str, float]]
    ingest_documents: dict[str, float]
    ingest_chunks: float
    jobs: dict[str, int] | None
    queue_depth: dict[str, int] | None
    dependencies: dict[str, bool]
    answers: dict[str, float]
    answer_sentences: dict[str, float]
    history: list[PastReadingRead] = Field(
        default_factory=list, description="Earlier search totals, oldest first."
    )
