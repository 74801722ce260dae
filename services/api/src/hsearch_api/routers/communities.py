"""``/v1/communities``: the tenant's concept communities (the Level 1 index of lazy
search, docs/lazy.md).

A tenant's key with the search or the ingest scope reads them; a scoped search token is
refused (403): the communities and their phrases are computed over the whole tenant,
so a token whose filter excludes documents would learn of their contents.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from hsearch.concepts.index import Community, ConceptIndex
from hsearch.errors import CommunityNotFoundError, ConceptsUnavailableError
from hsearch_api.deps import ReadTenantDep, ServicesDep
from hsearch_api.schemas.communities import (
    CommunityChunkRead,
    CommunityDetailRead,
    CommunityDocumentRead,
    CommunityListRead,
    CommunityRead,
)
from hsearch_api.schemas.errors import COMMON_ERRORS, error_responses

router = APIRouter(prefix="/v1", tags=["communities"], responses=COMMON_ERRORS)

DOCUMENTS_PER_COMMUNITY = 3
"""Documents a listed community names."""


@router.get("/communities")
async def list_communities(
    tenant: ReadTenantDep,
    services: ServicesDep,
    *,
    level: Annotated[int | None, Query(ge=0, le=10)] = None,
    parent: Annotated[str | None, Query(max_length=64)] = None,
    concept: Annotated[
        list[str] | None,
        Query(
            max_length=16,
            description="Only communities holding these concepts, best first (repeat the "
            "parameter; a phrase finds the concepts made of its words).",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> CommunityListRead:
    """The tenant's concept communities: of a level, children of a parent, or holding
    concepts."""
    index = await _index(services, tenant)
    found = index.find(level=level, parent=parent, concepts=concept or (), limit=limit)
    return CommunityListRead(
        version=index.version, communities=[community_read(index, c) for c in found]
    )


@router.get("/communities/{community_id}", responses=error_responses(404))
async def read_community(
    community_id: str, tenant: ReadTenantDep, services: ServicesDep
) -> CommunityDetailRead:
    """One concept community with its chunks, best first."""
    index = await _index(services, tenant)
    community = index.community(community_id)
    if community is None:
        raise CommunityNotFoundError(f"community {community_id!r} not found")
    chunks: list[CommunityChunkRead] = []
    for chunk in community.chunk_ids:
        doc = index.document(chunk)
        if doc is not None:
            chunks.append(
                CommunityChunkRead(
                    chunk_id=chunk,
                    external_id=doc[1],
                    title=doc[2],
                    concepts=list(index.chunk_concepts(chunk)),
                )
            )
    return CommunityDetailRead(
        **community_read(index, community).model_dump(), version=index.version, chunks=chunks
    )


async def _index(services: ServicesDep, tenant: str) -> ConceptIndex:
    concepts = services.concepts
    if concepts is None:
        raise ConceptsUnavailableError("this process keeps no concept indexes")
    return await concepts.current(tenant, timeout=services.settings.concepts.wait_s)


def community_read(index: ConceptIndex, community: Community) -> CommunityRead:
    return CommunityRead(
        id=community.id,
        level=community.level,
        parent=community.parent,
        children=list(community.children),
        concepts=list(community.concepts),
        size=community.size,
        chunk_count=community.chunk_count,
        documents=[
            CommunityDocumentRead(external_id=external_id, title=title)
            for _, external_id, title in index.documents_of(
                community, limit=DOCUMENTS_PER_COMMUNITY
            )
        ],
    )
