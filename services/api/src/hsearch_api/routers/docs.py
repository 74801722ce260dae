"""The API's interactive documentation, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc),
with their scripts and styles served by the API itself: FastAPI's default pages load
them from a CDN, so without internet ``/docs`` is a blank page (docs/api.md).

The files are those the ``fastapi-offline`` package ships (Swagger UI 5, ReDoc 2): only
its ``static`` folder is used, the pages are FastAPI's own (:func:`get_swagger_ui_html`,
:func:`get_redoc_html`).
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

DOCS_PATH = "/docs"
REDOC_PATH = "/redoc"
ASSETS_PATH = "/docs/static"

SWAGGER_JS = "swagger-ui-bundle.js"
SWAGGER_CSS = "swagger-ui.css"
REDOC_JS = "redoc.standalone.js"
FAVICON = "favicon.png"

# Nothing from another host, whatever the bundles ask for (ReDoc's sidebar links a logo
# on its vendor's CDN): the browser does not even send such a request. FastAPI's pages
# start the bundles with an inline script; ReDoc runs its search in a blob: worker.
DOCS_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' "
        "'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; worker-src 'self' "
        "blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
}


def assets_directory() -> str:
    """Where the installed ``fastapi-offline`` keeps the Swagger UI and ReDoc files."""
    return str(files("fastapi_offline").joinpath("static"))


def create_router(*, title: str, openapi_url: str) -> APIRouter:
    """``/docs``, ``/redoc`` and their assets, for the OpenAPI document at
    ``openapi_url``. Left out of that document: they present it."""
    router = APIRouter(include_in_schema=False)
    assets = StaticFiles(directory=assets_directory())

    def asset(request: Request, name: str) -> str:
        return f"{request.scope.get('root_path', '')}{ASSETS_PATH}/{name}"

    @router.get(ASSETS_PATH + "/{name:path}")
    async def docs_asset(name: str, request: Request) -> Response:
        """The documentation pages' scripts, styles and icon."""
        return await assets.get_response(name, request.scope)

    @router.get(DOCS_PATH)
    async def swagger_ui(request: Request) -> HTMLResponse:
        """The API's operations, to read and try (Swagger UI)."""
        root = request.scope.get("root_path", "")
        page = get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{title} - Swagger UI",
            # The API takes bearer keys, no OAuth2 flow: no redirect page.
            oauth2_redirect_url=None,
            swagger_js_url=asset(request, SWAGGER_JS),
            swagger_css_url=asset(request, SWAGGER_CSS),
            swagger_favicon_url=asset(request, FAVICON),
            # No badge fetched from the public validator: nothing leaves the API.
            swagger_ui_parameters={"validatorUrl": None},
        )
        page.headers.update(DOCS_HEADERS)
        return page

    @router.get(REDOC_PATH)
    async def redoc(request: Request) -> HTMLResponse:
        """The API's reference (ReDoc)."""
        root = request.scope.get("root_path", "")
        page = get_redoc_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{title} - ReDoc",
            redoc_js_url=asset(request, REDOC_JS),
            redoc_favicon_url=asset(request, FAVICON),
            with_google_fonts=False,
        )
        page.headers.update(DOCS_HEADERS)
        return page

    return router
