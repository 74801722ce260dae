"""Request dependencies, as ``Annotated`` aliases routers declare."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, cast

from fastapi import Depends, Request
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import Settings
from hsearch.errors import UnsupportedMediaTypeError
from hsearch.ingestion.dispatch import UnitOfWork, unit_of_work
from hsearch.ingestion.documents import DocumentService
from hsearch.ingestion.jobs import JobService
from hsearch.ingestion.queue import JobQueue
from hsearch.runtime import Services
from hsearch.search.service import SearchService
from hsearch_api.schemas.ndjson import NDJSON_MEDIA_TYPES


def get_services(request: Request) -> Services:
    return cast("Services", request.state.services)


def get_settings_dep(request: Request) -> Settings:
    return get_services(request).settings


def get_session_factory(request: Request) -> sessionmaker[Session]:
    return get_services(request).sessions


def get_search_service(request: Request) -> SearchService:
    return get_services(request).search


def get_document_service(request: Request) -> DocumentService:
    return get_services(request).documents()


def get_job_queue(request: Request) -> JobQueue:
    return get_services(request).queue


ServicesDep = Annotated[Services, Depends(get_services)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
SessionFactoryDep = Annotated[sessionmaker[Session], Depends(get_session_factory)]
JobQueueDep = Annotated[JobQueue, Depends(get_job_queue)]
SearchServiceDep = Annotated[SearchService, Depends(get_search_service)]
DocumentServiceDep = Annotated[DocumentService, Depends(get_document_service)]


def get_unit_of_work(sessions: SessionFactoryDep, queue: JobQueueDep) -> Iterator[UnitOfWork]:
    """The request's transaction: committed when the endpoint returns, rolled back if it
    raises; the jobs queued during the request are sent only after the commit."""
    with unit_of_work(sessions, queue=queue) as uow:
        yield uow


# scope="function": the commit and the sends finish before the response is sent, so a
# failed commit or send is the response (503), never a 202 for work that was lost.
UnitOfWorkDep = Annotated[UnitOfWork, Depends(get_unit_of_work, scope="function")]


def get_job_service(uow: UnitOfWorkDep, settings: SettingsDep) -> JobService:
    return JobService(uow, settings=settings.ingest, webhooks=settings.webhooks)


def get_tenant(settings: SettingsDep) -> str:
    """The tenant of the request. Until API keys land (roadmap: multi-tenant API) every
    request belongs to the configured default tenant; never taken from the body."""
    return settings.api.default_tenant


JobServiceDep = Annotated[JobService, Depends(get_job_service)]
TenantDep = Annotated[str, Depends(get_tenant)]


async def get_ndjson_body(request: Request) -> bytes:
    """The body of an NDJSON upload, refused with 415 unless declared as NDJSON (a JSON
    body sent here by mistake would otherwise fail line by line)."""
    declared = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if declared not in NDJSON_MEDIA_TYPES:
        msg = (
            f"content-type: send {NDJSON_MEDIA_TYPES[0]} (one JSON document per line), "
            f"got {declared or 'none'!r}"
        )
        raise UnsupportedMediaTypeError(msg)
    return await request.body()


NdjsonBodyDep = Annotated[bytes, Depends(get_ndjson_body)]
