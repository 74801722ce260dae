from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictInt

from hsearch.types import Scope


class KeyCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"scopes": ["search"], "name": "web frontend", "expires_at": "2027-01-01T00:00:00Z"}
            ]
        },
    )

    scopes: list[Scope] = Field(min_length=1, max_length=len(Scope))
    # No NUL character: Postgres cannot store one (hsearch.ingestion.storable).
    name: str = Field(
        default="", max_length=256, pattern=r"^[^\x00]*$", description="What the key is for."
    )
    expires_at: AwareDatetime | None = Field(
        default=None, description="When the key stops working (in the future); unset: never."
    )


class KeyRead(BaseModel):
    """A key as it may be shown again: everything but the key itself."""

    id: uuid.UUID
    prefix: str = Field(description="The key's public part (hsk_...): safe to show and log.")
    scopes: list[str]
    name: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None = Field(
        description="When an API process last checked the key against the database: "
        "updated at most once per auth.cache_ttl_s per process, not on every request."
    )


class KeyCreated(KeyRead):
    key: str = Field(description="The key: shown this once, stored only as a hash.")


class KeyList(BaseModel):
    keys: list[KeyRead]


class TokenCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "filter": {"tags": {"contains_any": ["team-a"]}},
                    "max_top_k": 20,
                    "expires_in_s": 600,
                }
            ]
        },
    )

    filter: dict[str, object] = Field(
        description="The mandatory filter (docs/filters.md), ANDed into every search and "
        "document read made with the token; it may not name the tenant or a chunk's ordinal."
    )
    max_top_k: StrictInt | None = Field(
        default=None, ge=1, description="The largest top_k the token may ask for."
    )
    expires_in_s: StrictInt | None = Field(
        default=None,
        ge=1,
        description="Lifetime in seconds: default auth.token_default_ttl_s, at most "
        "auth.token_max_ttl_s, and never past the minting key's own expiry.",
    )


class TokenCreated(BaseModel):
    token: str = Field(description="The search token, sent as Authorization: Bearer <token>.")
    expires_at: datetime
