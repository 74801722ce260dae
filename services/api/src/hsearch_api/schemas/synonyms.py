"""The body of ``PUT /v1/synonyms`` and of its ``GET``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SynonymRule(BaseModel):
    """Either ``words`` (multi-way: each of them also searches for the others) or
    ``from`` and ``to`` (one-way: ``from`` also searches for each of ``to``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    words: list[str] | None = Field(
        default=None, description="Multi-way: at least two terms (a word or a few words)."
    )
    from_: str | None = Field(
        default=None, alias="from", description="One-way: the term a query holds."
    )
    to: list[str] | None = Field(
        default=None, description="One-way: what `from` also searches for."
    )


class SynonymSet(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "synonyms": [
                        {"words": ["car", "automobile"]},
                        {"from": "nyc", "to": ["new york"]},
                    ]
                }
            ]
        },
    )

    synonyms: list[SynonymRule] = Field(
        description="The rules, replacing the tenant's (at most 1,000; docs/search.md)."
    )
