"""The ASGI application: ``uvicorn hsearch_api.main:create_app --factory``."""

from __future__ import annotations

from fastapi import FastAPI

from hsearch import __version__
from hsearch.config import Settings, get_settings
from hsearch.logging import configure_logging
from hsearch_api.errors import install_error_handlers
from hsearch_api.lifespan import make_lifespan
from hsearch_api.routers import documents, health, search


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    configure_logging(settings.log_level)
    app = FastAPI(
        title="hsearch",
        version=__version__,
        description="Hybrid dense + sparse search on Milvus.",
        lifespan=make_lifespan(settings, migrate=settings.api.migrate_on_start),
    )
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(documents.router)
    app.include_router(search.router)
    return app
