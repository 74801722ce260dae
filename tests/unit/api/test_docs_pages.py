"""``/docs`` (Swagger UI) and ``/redoc`` load nothing from another host: their scripts,
styles and icon are served by the API itself (routers/docs.py). The browser test
(tests/integration/test_pages_browser.py) renders them with every other host cut off."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.unit.api.conftest import Api


@pytest.fixture
async def browser(api: Api) -> httpx.AsyncClient:
    return api.anonymous()


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        ("/docs", {"swagger-ui-bundle.js": "SwaggerUIBundle", "swagger-ui.css": ".swagger-ui"}),
        ("/redoc", {"redoc.standalone.js": "Redoc"}),
    ],
)
async def test_the_docs_pages_load_their_assets_from_the_api(
    browser: httpx.AsyncClient, page: str, expected: dict[str, str]
) -> None:
    async with browser:
        html = await browser.get(page)
        assert html.status_code == 200
        assert "text/html" in html.headers["content-type"]
        urls = re.findall(r'(?:src|href)="([^"]+)"', html.text)
        urls += re.findall(r"url: '([^']+)'", html.text) + re.findall(
            r'spec-url="([^"]+)"', html.text
        )
        assert urls, html.text
        for url in urls:
            assert url.startswith("/"), f"{page} loads {url} from another host"
            assert (await browser.get(url)).status_code == 200, url
        assert "/openapi.json" in urls
        assert "fonts.googleapis" not in html.text
        # What a bundle asks of another host on its own is blocked by the browser.
        policy = html.headers["content-security-policy"]
        assert "default-src 'self'" in policy
        assert "img-src 'self' data:;" in policy
        for name, marker in expected.items():
            assert f"/docs/static/{name}" in urls
            asset = await browser.get(f"/docs/static/{name}")
            assert marker in asset.text


async def test_the_docs_assets_route_serves_nothing_else(browser: httpx.AsyncClient) -> None:
    async with browser:
        for path in ("/docs/static/missing.js", "/docs/static/%2e%2e/core.py"):
            assert (await browser.get(path)).status_code == 404, path


async def test_the_docs_pages_are_not_in_the_openapi_document(browser: httpx.AsyncClient) -> None:
    async with browser:
        paths = (await browser.get("/openapi.json")).json()["paths"]
    assert not [p for p in paths if p.startswith(("/docs", "/redoc"))]
