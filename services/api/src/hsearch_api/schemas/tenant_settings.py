"""The body of ``PATCH /v1/settings`` and what it and ``GET /v1/settings`` answer."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from hsearch.graph.links import TextLinks

_TEXT_LINKS = (
    "The links found in a document's text when its submission's `text_links` is null: "
    "`hyperlinks` (Markdown, HTML and [[wiki]] links naming a document by external id, "
    "path or title) and `mentions` (other documents' titles named in the text, as whole "
    "words). Applies to documents indexed from then on: those indexed already keep their "
    "links until they are submitted again or re-linked (`hsearch links relink --tenant "
    "ID`, docs/graph.md)."
)


class TenantSettingsRead(BaseModel):
    text_links: list[TextLinks] = Field(description=_TEXT_LINKS)


class TenantSettingsPatch(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"text_links": ["hyperlinks"]}]}
    )

    text_links: list[TextLinks] | None = Field(
        default=None, description=_TEXT_LINKS + " Left out (or null): unchanged; `[]`: none."
    )
