"""The built-in pages in headless Chromium (Debian's ``chromium``, driven by Playwright
through ``executable_path``), against a real stack: the API in two uvicorn processes
and a Celery worker sharing one PROMETHEUS_MULTIPROC_DIR, on Postgres, Redis and the
session's Milvus Lite server.

An operator logs in with their credential, traffic is generated (an ingest job,
searches, one that fails), and then the ``/ops`` charts hold data (non-zero series) and
the playground shows a hit's explanation: each leg's rank and score, the fused score,
the weights and the per-stage timings. Opened after searches ran, ``/ops`` draws them at
once from the server's history. ``/docs`` and ``/redoc`` render with every host but the
API's cut off. Screenshots go to ``tests/artifacts/``.

Without chromium (or Playwright) the tests skip, except with CI set, where they fail:
``.ci/run`` installs chromium with apt-get.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from hsearch.local.processes import start_api
from hsearch.metrics.exposition import MULTIPROC_ENV, prepare_multiprocess_dir
from hsearch.tenancy.factory import open_tenancy
from tests.integration.conftest import settings_from_env, stack_env
from tests.integration.services import private_redis, start_test_worker

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DOCS = [
    {
        "external_id": f"geo-{i}",
        "title": title,
        "text": text,
        "source": "atlas",
    }
    for i, (title, text) in enumerate(
        [
            ("Volcanoes", "A volcano erupts molten rock, ash and gases from the mantle."),
            ("Glaciers", "A glacier is a slow river of ice carving its valley."),
            ("Deserts", "A desert receives little rain; dunes move with the wind."),
            ("Rivers", "A river carries water and sediment from mountains to the sea."),
            ("Reefs", "A coral reef is built by colonies of tiny animals in warm seas."),
        ]
    )
]
MOUNTAINS = {
    # Many chunks of the encoder's 128-token window: one row when grouped, several not.
    "external_id": "geo-mountains",
    "title": "Mountains",
    "text": " ".join(
        f"Mountain range {i} rises where plates collide and peaks grow." for i in range(40)
    ),
    "source": "atlas",
}
QUERY = "volcano erupts ash"


def chromium_path() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: .ci/run installs chromium)")
    pytest.skip(reason)


@dataclass
class Running:
    base: str
    auth: dict[str, str]
    operator_key: str
    tenant: str
    env: dict[str, str]


@pytest.fixture(scope="module")
def browser_path() -> str:
    path = chromium_path()
    if path is None:
        unavailable("no chromium (apt-get install -y chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("playwright is not installed (the dev extra)")
    assert path is not None
    return path


@pytest.fixture(scope="module")
def running(
    browser_path: str,
    tmp_path_factory: pytest.TempPathFactory,
    pg_url: str,
    milvus_uri: str,
    tiny_bge_m3: Path,
) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("pages-stack")
    # A broker of its own: neither the session's worker nor another test session
    # beside it on the machine takes these jobs.
    with private_redis(root / "redis") as broker:
        env = stack_env(
            database_url=pg_url,
            broker_url=broker,
            milvus_uri=milvus_uri,
            collection=f"pg_{uuid.uuid4().hex[:8]}",
            encoder={"kind": "bge-m3", "bge_m3_path": str(tiny_bge_m3), "max_length": "128"},
            data_dir=root,
        )
        env[MULTIPROC_ENV] = str(prepare_multiprocess_dir(root / "metrics"))
        with open_tenancy(settings_from_env(env)) as tenancy:
            tenant = f"pg{uuid.uuid4().hex[:8]}"
            created = tenancy.create_tenant("pages", tenant_id=tenant, actor="test")
            operator = tenancy.create_operator_key(name="pages test", actor="test")
        worker = start_test_worker(env, root, name="pages")
        try:
            api, base = start_api(env, log=root / "api.log", workers=2)
        except BaseException:
            worker.stop()
            raise
        try:
            yield Running(
                base=base,
                auth={"Authorization": f"Bearer {created.key.key}"},
                operator_key=operator.key,
                tenant=tenant,
                env=env,
            )
        finally:
            api.stop()
            worker.stop()


def wait_until(check: Callable[[], Any], *, what: str, timeout: float = 45.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def ingest(run: Running, documents: list[dict[str, Any]]) -> None:
    resp = httpx.post(
        f"{run.base}/v1/documents", json={"documents": documents}, headers=run.auth, timeout=30
    )
    assert resp.status_code == 202, resp.text
    status_url = run.base + resp.json()["status_url"]

    def finished() -> dict[str, Any] | None:
        job: dict[str, Any] = httpx.get(status_url, headers=run.auth, timeout=10).json()
        return job if job["status"] in ("succeeded", "partial", "failed") else None

    job = wait_until(finished, what="the ingest job", timeout=90)
    assert job["status"] == "succeeded", job


def generate_traffic(run: Running) -> None:
    ingest(run, DOCS)
    for query in (QUERY, "glacier ice", "coral reef", "river sediment", QUERY):
        answer = httpx.post(
            f"{run.base}/v1/search", json={"query": query}, headers=run.auth, timeout=30
        )
        assert answer.status_code == 200, answer.text
    # A search whose legs cannot finish in 1 ms: a failed (or degraded) search.
    failed = httpx.post(
        f"{run.base}/v1/search",
        json={"query": "desert dunes", "leg_timeout_ms": 1},
        headers=run.auth,
        timeout=30,
    )
    assert failed.status_code in (200, 503), failed.text


def test_ops_charts_and_playground_explanations_in_chromium(
    running: Running, browser_path: str
) -> None:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.set_default_timeout(30_000)

            # No session: the page sends the browser to the login.
            page.goto(f"{running.base}/ops")
            assert page.url.endswith("/ops/login")
            page.fill("#key", running.operator_key)
            page.click("#login-button")
            page.wait_for_url(f"{running.base}/ops")
            assert running.operator_key not in page.url
            cookies = {c["name"]: c for c in page.context.cookies()}
            session = cookies["hsearch_ops_session"]
            assert (session["httpOnly"], session["sameSite"]) == (True, "Strict")
            assert running.operator_key not in session["value"]
            page.wait_for_selector("body[data-readings]")

            generate_traffic(running)

            def nonzero(panel: str) -> int:
                value = page.get_attribute(f'[data-panel="{panel}"]', "data-nonzero")
                return int(value or 0)

            def charted(panel: str) -> Callable[[], bool]:
                return lambda: nonzero(panel) > 0

            for panel in ("searches", "latency", "degraded", "ingest", "jobs"):
                wait_until(charted(panel), what=f"the {panel} chart's data")

            def points(panel: str) -> int:
                return int(page.get_attribute(f'[data-panel="{panel}"]', "data-points") or 0)

            assert points("queue") > 0  # a gauge: 0 once the worker has taken every job
            # A few more readings, so that the screenshot shows lines rather than dots.
            wait_until(lambda: points("searches") >= 4, what="four readings")
            assert nonzero("searches") > 0
            assert page.locator('[data-panel="searches"] canvas').count() == 1
            latest = page.inner_text('[data-panel="latency"] .latest')
            assert "dense p95" in latest
            assert page.inner_text("#ops-error") == ""
            page.screenshot(path=str(ARTIFACTS / "ops.png"), full_page=True)

            # The playground: search as the tenant, each hit explained.
            page.click('a[href="/playground"]')
            page.wait_for_url(f"{running.base}/playground")
            page.wait_for_selector(f'#tenant option[value="{running.tenant}"]', state="attached")
            page.select_option("#tenant", running.tenant)
            page.fill("#query", QUERY)
            page.select_option("#fusion", "rrf")
            page.fill("#top_k", "3")
            page.click("#run")
            page.wait_for_selector("#hits tbody tr.hit")
            assert page.inner_text("#search-error") == ""
            first = page.locator("#hits tbody tr.hit").first.locator("td").all_inner_texts()
            # #, document, chunk, matching chunks, fused score, dense rank/score, sparse
            # rank/score, rerank
            assert first[1] == "Volcanoes"
            # The snippet's matches are marked, its text never parsed as HTML.
            hit = page.locator("#hits tbody tr.hit").first
            assert hit.locator("mark").count() >= 1
            assert "<em>" not in first[2]
            assert float(first[4]) > 0
            assert first[5] == "1" or first[7] == "1"
            assert float(first[6]) != 0 or float(first[8]) != 0
            for field in ("weights", "applied weights"):
                weights = page.inner_text(f'dd[data-field="{field}"]')
                assert "dense" in weights
                assert "sparse" in weights
            assert page.inner_text('dd[data-field="method"]') == "rrf"
            retrieval = page.inner_text('#timings tr[data-stage="retrieval_ms"] td:nth-child(2)')
            assert float(retrieval) > 0
            assert page.locator("#legs tbody tr").count() == 2
            # One hit per document by default (the box is checked, the request says so);
            # unchecked, a document of many chunks takes several rows.
            assert page.is_checked("#group_by_document")
            ingest(running, [MOUNTAINS])
            page.fill("#query", "mountain range peaks")
            page.fill("#top_k", "10")

            def documents_column(grouped: bool) -> list[str]:
                shown = int(page.get_attribute("body", "data-searches") or 0)
                with page.expect_request("**/ops/api/search") as sent:
                    page.click("#run")
                posted = sent.value.post_data_json
                assert posted is not None
                assert posted["group_by_document"] is grouped
                page.wait_for_selector(f'body[data-searches="{shown + 1}"]')
                rows = page.locator("#hits tbody tr.hit")
                return [rows.nth(i).locator("td").nth(1).inner_text() for i in range(rows.count())]

            grouped = documents_column(True)
            assert grouped.count("Mountains") == 1
            assert len(grouped) == len(set(grouped)) == len(DOCS) + 1
            mountains = page.locator("#hits tbody tr.hit", has_text="Mountains")
            assert int(mountains.locator("td").nth(3).inner_text()) > 1  # matching chunks
            page.uncheck("#group_by_document")
            chunks = documents_column(False)
            assert chunks.count("Mountains") > 1
            page.check("#group_by_document")
            assert documents_column(True) == grouped  # what the screenshot shows
            # Typo tolerance (on by default): a misspelt word is corrected and the
            # correction shown; unchecked, the request says so and nothing is corrected.
            assert page.is_checked("#typo_tolerance")
            page.fill("#query", "volcanoe erupts")
            documents_column(True)
            assert "volcanoe → volcano (typo 1)" in page.inner_text('dd[data-field="expansions"]')
            page.uncheck("#typo_tolerance")
            with page.expect_request("**/ops/api/search") as sent:
                page.click("#run")
            posted = sent.value.post_data_json
            assert posted is not None
            assert posted["typo_tolerance"] is False
            page.wait_for_selector('dd[data-field="expansions"]:text-is("none")')
            page.check("#typo_tolerance")
            # Sort by a field: the request carries the clause, the summary its basis and
            # the rows come in the field's order.
            page.fill("#query", "rock ice water rain coral")
            page.fill("#sort_field", "title")
            page.select_option("#sort_order", "asc")
            titles = documents_column(True)
            assert titles == sorted(titles, key=str.lower)
            assert page.inner_text('dd[data-field="sort"]').startswith("title asc, _score desc")
            page.fill("#sort_field", "")
            # Search as you type: a pause in typing searches with the last word as a prefix.
            page.check("#prefix")
            page.select_option("#mode", "keyword")  # the completion alone decides
            shown = int(page.get_attribute("body", "data-searches") or 0)
            with page.expect_request("**/ops/api/search") as sent:
                page.fill("#query", "")
                page.type("#query", "glaci", delay=20)
            posted = sent.value.post_data_json
            assert posted is not None
            assert posted["prefix"] is True
            page.wait_for_selector(f'body[data-searches="{shown + 1}"]')
            first_row = page.locator("#hits tbody tr.hit").first
            assert first_row.locator("td").nth(1).inner_text() == "Glaciers"
            page.uncheck("#prefix")
            page.select_option("#mode", "hybrid")
            page.fill("#query", "mountain range peaks")
            # Asking: this stack has no model, so the passages come back with the reason.
            page.click("#ask")
            page.wait_for_selector("#answer:not([hidden])")
            assert "model_unavailable" in page.inner_text("#answer-status")
            assert page.locator("#answer-passages li").count() >= 1
            page.screenshot(path=str(ARTIFACTS / "playground.png"), full_page=True)
        finally:
            browser.close()

    # The playground's search is in the audit log under the operator's credential.
    with open_tenancy(settings_from_env(running.env)) as tenancy:
        events = tenancy.audit_log(tenant_id=running.tenant, limit=5)
    prefix = running.operator_key[: len("hso_") + 12]
    assert any(
        (e.actor, e.action, e.target) == (f"key:{prefix}", "api.request", "POST /ops/api/search")
        for e in events
    )
    assert (ARTIFACTS / "ops.png").stat().st_size > 10_000
    assert (ARTIFACTS / "playground.png").stat().st_size > 10_000


def cut_off_from_other_hosts(context: Any, base: str) -> list[str]:
    """Abort every request of ``context`` to a host other than the API's (``set_offline``
    would cut the API too); the URLs it was asked for, in order."""
    local = urlsplit(base).netloc
    elsewhere: list[str] = []

    def guard(route: Any) -> None:
        url = route.request.url
        if urlsplit(url).scheme in ("data", "blob") or urlsplit(url).netloc == local:
            route.continue_()
        else:
            elsewhere.append(url)
            route.abort("internetdisconnected")

    context.route("**/*", guard)
    return elsewhere


def test_the_api_docs_render_with_no_other_host_reachable(
    running: Running, browser_path: str
) -> None:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1100})
            context.set_default_timeout(30_000)
            elsewhere = cut_off_from_other_hosts(context, running.base)
            page = context.new_page()
            failed: list[tuple[str, str]] = []
            page.on(
                "requestfailed", lambda request: failed.append((request.url, request.failure or ""))
            )

            page.goto(f"{running.base}/docs")
            search = page.locator('.opblock-post [data-path="/v1/search"]')
            search.first.wait_for()
            assert page.locator(".opblock").count() > 10
            assert "hsearch" in page.inner_text(".info .title")
            page.screenshot(path=str(ARTIFACTS / "docs.png"))

            page.goto(f"{running.base}/redoc")
            page.wait_for_selector(".api-info h1")
            assert page.inner_text(".api-info h1").startswith("hsearch")
            # The operations are listed in its menu (a method badge each; the tags that
            # hold them start folded).
            page.locator(".menu-content .operation-type.post").first.wait_for(state="attached")
            assert page.locator(".menu-content .operation-type").count() > 10
            page.screenshot(path=str(ARTIFACTS / "redoc.png"))
        finally:
            browser.close()
    # Nothing reached the network for another host: ReDoc's sidebar asks for its vendor's
    # logo on a CDN, which the page's Content-Security-Policy blocks in the browser.
    assert elsewhere == [], f"the docs asked for other hosts: {elsewhere}"
    local = urlsplit(running.base).netloc
    assert [url for url, _ in failed if urlsplit(url).netloc == local] == []
    assert all(why == "csp" for _, why in failed), failed


def test_the_ops_page_opens_on_the_searches_that_ran_before(
    running: Running, browser_path: str
) -> None:
    from playwright.sync_api import sync_playwright

    # A scrape keeps a snapshot of the search totals (as Prometheus' would), then
    # searches run, and only then is the page opened.
    assert httpx.get(f"{running.base}/metrics", timeout=30).status_code == 200
    for query in ("glacier ice", "coral reef", QUERY):
        answer = httpx.post(
            f"{running.base}/v1/search", json={"query": query}, headers=running.auth, timeout=30
        )
        assert answer.status_code == 200, answer.text
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.set_default_timeout(30_000)
            page.goto(f"{running.base}/ops/login")
            page.fill("#key", running.operator_key)
            page.click("#login-button")
            page.wait_for_url(f"{running.base}/ops")
            # The first reading is drawn: no poll after it has had time to add a point.
            page.wait_for_selector("body[data-readings]")
            panel = '[data-panel="searches"]'
            assert int(page.get_attribute("body", "data-history") or 0) >= 1
            assert int(page.get_attribute(panel, "data-nonzero") or 0) > 0
            assert "no searches recorded yet" not in page.inner_text(f"{panel} .latest")
            latency = page.inner_text('[data-panel="latency"] .latest')
            assert "dense p95" in latency
            assert "recorded yet" not in latency
            assert page.inner_text("#ops-error") == ""
        finally:
            browser.close()
