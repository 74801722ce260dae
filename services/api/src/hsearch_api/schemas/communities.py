"""``/v1/communities``: the tenant's concept communities (the Level 1 index of lazy
search, docs/lazy.md)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class CommunityDocumentRead(BaseModel):
    external_id: str
    title: str


class CommunityRead(BaseModel):
    id: str = Field(description="Stable for the same data (derived from its level and concepts).")
    level: int = Field(description="0: the top of the hierarchy; a child is one level down.")
    parent: str | None
    children: list[str]
    concepts: list[str] = Field(
        description="Representative phrases, best first (computed over the whole tenant)."
    )
    size: int = Field(description="Concepts in it.")
    chunk_count: int = Field(description="Chunks holding any of its concepts.")
    documents: list[CommunityDocumentRead] = Field(
        description="A few documents of its best chunks, best first."
    )


class CommunityListRead(BaseModel):
    version: str = Field(description="The tenant's data version the index was built at.")
    communities: list[CommunityRead]


class CommunityChunkRead(BaseModel):
    chunk_id: str
    external_id: str
    title: str
    concepts: list[str] = Field(description="The chunk's concepts, in reading order.")


class CommunityDetailRead(CommunityRead):
    version: str
    chunks: list[CommunityChunkRead] = Field(
        description="Its chunks, best first (those holding most of its concepts; at most "
        "concepts.chunks_per_community)."
    )


class ConceptStatusRead(BaseModel):
    """The tenant's Level 1 index in the process that answered (docs/lazy.md)."""

    state: str = Field(
        description="none (not built yet), building, ready (at the tenant's data version), "
        "or stale (at an older one: a build of the current one is started)."
    )
    version: str | None = Field(description="The data version of the index held.")
    chunks: int = Field(description="Chunks with concepts.")
    concepts: int = Field(description="Concepts that are nodes of the co-occurrence graph.")
    links: int = Field(description="Co-occurrence links.")
    communities: dict[str, int] = Field(description="Communities per level.")
    build_s: float | None
    building: str | None = Field(description="The version being built, during a build.")
    stage: str | None = Field(
        description="During a build: reading, counting, linking or communities."
    )
    fraction: float | None = Field(description="During a build: the share of its stage done.")
    error: str | None = Field(description="Why the last build failed (until one succeeds).")
