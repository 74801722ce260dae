"""Request dependencies, as ``Annotated`` aliases routers declare."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, cast

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from hsearch.config import Settings
from hsearch.ingestion.queue import JobQueue
from hsearch.runtime import Services
from hsearch.search.service import SearchService


def get_services(request: Request) -> Services:
    return cast("Services", request.state.services)


def get_settings_dep(request: Request) -> Settings:
    return get_services(request).settings


def get_session(request: Request) -> Iterator[Session]:
    """One session per request; the boundary commits on success, rolls back on error."""
    with get_services(request).sessions() as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def get_search_service(request: Request) -> SearchService:
    return get_services(request).search


def get_job_queue(request: Request) -> JobQueue:
    return get_services(request).queue


def get_tenant(request: Request) -> str:
    """The tenant of the request. Until API keys land (roadmap: multi-tenant API) every
    request belongs to the configured default tenant; never taken from the body."""
    return get_services(request).settings.api.default_tenant


ServicesDep = Annotated[Services, Depends(get_services)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
SessionDep = Annotated[Session, Depends(get_session)]
SearchServiceDep = Annotated[SearchService, Depends(get_search_service)]
JobQueueDep = Annotated[JobQueue, Depends(get_job_queue)]
TenantDep = Annotated[str, Depends(get_tenant)]
