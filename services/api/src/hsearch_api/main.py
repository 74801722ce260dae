"""The ASGI application: ``uvicorn hsearch_api.main:create_app --factory``."""

from __future__ import annotations

from fastapi import FastAPI

from hsearch import __version__
from hsearch.config import Settings, get_settings
from hsearch.logging import configure_logging
from hsearch.runtime import Services
from hsearch_api.errors import install_error_handlers
from hsearch_api.lifespan import make_lifespan
from hsearch_api.limits import BodySizeLimit
from hsearch_api.routers import documents, health, keys, search


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
    configure_logging(settings.log_level)
    app = FastAPI(
        title="hsearch",
        version=__version__,
        description="Hybrid dense + sparse search on Milvus.",
        lifespan=make_lifespan(settings, migrate=settings.api.migrate_on_start, services=services),
    )
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.api.max_request_bytes)
    app.include_router(health.router)
    app.include_router(documents.router)
    app.include_router(search.create_router(settings.search))
    app.include_router(keys.router)
    return app
