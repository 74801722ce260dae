"""The ASGI application: ``uvicorn hsearch_api.main:create_app --factory``."""

from __future__ import annotations

from fastapi import Depends, FastAPI

from hsearch import __version__
from hsearch.config import Settings, get_settings
from hsearch.logging import configure_logging
from hsearch.runtime import Services, source_names
from hsearch.tenancy.service import TENANT_HEADER
from hsearch_api.cors import CorsMiddleware
from hsearch_api.errors import install_error_handlers
from hsearch_api.lifespan import make_lifespan
from hsearch_api.limits import ApiLimits, BodySizeLimit, with_limits
from hsearch_api.mcp.local import local_server
from hsearch_api.observability import RequestObserver
from hsearch_api.params import refuse_unknown_query_parameters
from hsearch_api.routers import (
    answers,
    chat,
    communities,
    docs,
    documents,
    health,
    keys,
    mcp,
    metrics,
    pages,
    search,
    stats,
    synonyms,
    tenant_settings,
)
from hsearch_api.schemas.answers import answer_request_model
from hsearch_api.schemas.search import search_request_model


def create_app(settings: Settings | None = None, *, services: Services | None = None) -> FastAPI:
    """The API on ``settings`` (default: the environment's).

    ``services`` are served instead of the ones the lifespan would build from the
    settings (:func:`hsearch.runtime.build_services`): that is how tests run the real
    app on an in-memory store, the fake encoder and an in-memory job queue. Their
    builder closes them; ``settings`` then defaults to theirs and must equal it.
    """
    if services is not None:
        if settings is not None and settings != services.settings:
            msg = "create_app: settings differ from the settings the services were built with"
            raise ValueError(msg)
        settings = services.settings
    settings = settings or get_settings()
    configure_logging(settings.log_level, settings.log_format.value)
    limits = ApiLimits.from_settings(settings)
    # The registered sources name the legs of the OpenAPI document: the given services',
    # or those build_services makes from the settings (the lifespan checks they agree).
    legs = services.search.sources.names if services is not None else source_names(settings)
    lifespan = make_lifespan(
        settings, migrate=settings.api.migrate_on_start, services=services, legs=legs
    )
    # The MCP tools take the request models this app serves, with its limits.
    mcp_server = local_server(
        search_request=search_request_model(settings.search, legs),
        answer_request=answer_request_model(legs),
    )
    app = FastAPI(
        title="hsearch",
        version=__version__,
        description="Hybrid dense + sparse search on Milvus.",
        lifespan=with_limits(mcp.with_mcp(lifespan, mcp_server), limits),
        dependencies=[Depends(refuse_unknown_query_parameters)],
        # Served by routers/docs.py with their assets: the defaults load them from a CDN.
        docs_url=None,
        redoc_url=None,
    )
    app.state.limits = limits
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.api.max_request_bytes)
    if settings.api.cors_origins:
        # Outside every other layer but the observer, so that refusals (413, 429, ...)
        # carry the headers a browser needs to read them.
        app.add_middleware(
            CorsMiddleware,
            allow_origins=settings.api.cors_origins,
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", TENANT_HEADER],
            expose_headers=["Retry-After", "WWW-Authenticate"],
            max_age=600,
        )
    # Added last, so outermost: refused bodies are counted and carry the request id too.
    app.add_middleware(RequestObserver)
    app.include_router(health.router)
    app.include_router(docs.create_router(title=app.title, openapi_url=app.openapi_url or ""))
    app.include_router(documents.router)
    app.include_router(search.create_router(settings.search, legs=legs))
    app.include_router(answers.create_router(legs=legs))
    app.include_router(chat.router)
    app.include_router(keys.router)
    app.include_router(synonyms.router)
    app.include_router(tenant_settings.router)
    app.include_router(metrics.router)
    app.include_router(stats.router)
    app.include_router(communities.router)
    app.include_router(pages.create_router(settings.search, settings.ops, legs=legs))
    app.include_router(mcp.create_router(mcp_server))
    return app
