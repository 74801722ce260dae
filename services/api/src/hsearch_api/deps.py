"""Request dependencies, as ``Annotated`` aliases routers declare."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, cast

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from hsearch.config import Settings
from hsearch.ingestion.queue import JobQueue
from hsearch.runtime import Resources
from hsearch.search.service import SearchService


def get_resources(request: Request) -> Resources:
    return cast("Resources", request.state.resources)


def get_settings_dep(request: Request) -> Settings:
    return get_resources(request).settings


def get_session(request: Request) -> Iterator[Session]:
    """One session per request; the boundary commits on success, rolls back on error."""
    with get_resources(request).sessions() as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def get_search_service(request: Request) -> SearchService:
    return cast("SearchService", request.state.search)


def get_job_queue(request: Request) -> JobQueue:
    return cast("JobQueue", request.state.queue)


def get_tenant(request: Request) -> str:
    """The tenant of the request. Until API keys land (roadmap: multi-tenant API) every
    request belongs to the configured default tenant; never taken from the body."""
    return get_resources(request).settings.api.default_tenant


ResourcesDep = Annotated[Resources, Depends(get_resources)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
SessionDep = Annotated[Session, Depends(get_session)]
SearchServiceDep = Annotated[SearchService, Depends(get_search_service)]
JobQueueDep = Annotated[JobQueue, Depends(get_job_queue)]
TenantDep = Annotated[str, Depends(get_tenant)]
