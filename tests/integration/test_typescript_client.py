"""The TypeScript client (``clients/typescript``) against the real stack, run by node.

The app is served by uvicorn on the session's Postgres, Redis, Milvus Lite and tiny
BGE-M3, a real Celery worker indexing; three documents are indexed in a fresh tenant, a
search token is minted for one of them, and ``npm test`` runs in the package with the
API's URL, the key and the token in its environment: the client's unit tests, its live
tests (test/live.test.ts), the README's examples compiled and, against a second fresh
tenant, run. Its generated types are checked against the app's current OpenAPI
document too (tests/unit/test_typescript_client.py checks ``openapi.json`` without node).

Without node or npm the tests skip, except with CI set, where they fail: node and npm
are on the machine (docs/development.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from hsearch.local.processes import Child, free_port, wait_until
from hsearch.tenancy.factory import open_tenancy
from hsearch_api.main import create_app
from hsearch_api.openapi import openapi_document, render
from hsearch_client import Client
from tests.integration.conftest import Stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"
DOCS: list[dict[str, Any]] = [
    {
        "external_id": "fox",
        "title": "Fox",
        "text": "The quick brown fox jumps over the dog.",
        "tags": ["animals"],
        "links": [{"target": "milvus"}],
    },
    {
        "external_id": "milvus",
        "title": "Milvus",
        "text": "Milvus runs dense and sparse search.",
        "tags": ["tech"],
    },
    {
        "external_id": "coffee",
        "title": "Coffee",
        "text": "Espresso needs a fine grind.",
        "tags": ["food"],
    },
]
TOKEN_FILTER = {"tags": {"contains_any": ["animals"]}}


def npm_command() -> str:
    """The path of npm, once node is there too; skips (fails with CI set) otherwise."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        reason = "node and npm are needed for the TypeScript client's tests"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI is set)")
        pytest.skip(reason)
    return npm


def run(command: list[str], *, env: dict[str, str] | None = None, timeout: float) -> str:
    """``command`` in the package; fails the test with its output when it fails."""
    done = subprocess.run(
        command,
        cwd=PACKAGE,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = done.stdout + done.stderr
    if done.returncode != 0:
        pytest.fail(f"{' '.join(command)} exited {done.returncode}:\n{output[-20000:]}")
    return output


@pytest.fixture(scope="module")
def npm() -> str:
    """npm, with the package's dependencies installed from its lock file."""
    command = npm_command()
    run([command, "ci", "--no-audit", "--no-fund"], timeout=300)
    return command


@dataclass
class Served:
    url: str
    key: str
    token: str
    readme_key: str
    """A key of another fresh tenant: the README's examples write there."""


@pytest.fixture
def served(stack: Stack, worker: Child) -> Iterator[Served]:
    """The API over HTTP (uvicorn, in a thread), :data:`DOCS` indexed in a fresh tenant,
    and a search token of that tenant limited to the documents tagged ``animals``."""
    suffix = uuid.uuid4().hex[:8]
    with open_tenancy(stack.settings) as tenancy:
        tenant = tenancy.create_tenant(f"ts {suffix}", tenant_id=f"ts{suffix}", actor="test")
        readme = tenancy.create_tenant(f"ts readme {suffix}", tenant_id=f"tr{suffix}", actor="test")
    port = free_port()
    config = uvicorn.Config(
        create_app(stack.settings), host="127.0.0.1", port=port, log_level="warning", ws="none"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="typescript-api", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=120, what="the API")
        url, key = f"http://127.0.0.1:{port}", tenant.key.key
        with Client(url, api_key=key) as client:
            job = client.wait_for_job(
                client.submit_documents(DOCS).job_id, timeout_s=120, poll_interval_s=0.2
            )
            assert job.status == "succeeded", job
        minted = httpx.post(
            f"{url}/v1/tokens",
            json={"filter": TOKEN_FILTER, "max_top_k": 20, "expires_in_s": 600},
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert minted.status_code == 201, minted.text
        yield Served(url=url, key=key, token=minted.json()["token"], readme_key=readme.key.key)
    finally:
        server.should_exit = True
        thread.join(60)


def test_the_generated_types_match_the_apps_openapi(npm: str, tmp_path: Path) -> None:
    document = tmp_path / "openapi.json"
    document.write_text(render(openapi_document()), encoding="utf-8")
    run(["node", "scripts/check-generated.mjs", str(document)], timeout=120)


def test_the_typescript_client_on_the_real_stack(npm: str, served: Served) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HSEARCH_")}
    env |= {
        "HSEARCH_TEST_URL": served.url,
        "HSEARCH_TEST_API_KEY": served.key,
        "HSEARCH_TEST_TOKEN": served.token,
        "HSEARCH_TEST_README_KEY": served.readme_key,
    }
    output = run([npm, "test"], env=env, timeout=420)
    assert "# fail 0" in output, output[-5000:]
    assert "# skipped 0" in output, "the live tests ran"
    assert "the README's 7 examples compile, and the repository README's 1" in output

    printed = {
        path.stem: path.read_text("utf-8").splitlines()
        for path in (PACKAGE / "build" / "readme").glob("*.out")
    }
    assert sorted(printed) == ["01", "02", "03", "04", "06"], sorted(printed)
    submit, pages, answers, tokens, errors = (printed[n] for n in sorted(printed))
    assert submit[0] == "succeeded 2"
    assert submit[1].startswith("volcano How volcanoes form ")
    assert "<em>Volcanoes</em>" in submit[1]
    assert pages[-3:-1] == ["river indexed 1", "volcano indexed 1"]
    assert pages[-1] == "0 0", "no links"
    assert answers[0].startswith("no answer: [")  # no model server in this stack
    assert answers[1] == "passages: 2"
    assert answers[-1] == "citations: 0"
    assert tokens[1] == "[ 'volcano' ]"
    assert tokens[2] == "404 document_not_found"
    assert errors[0] == "404 document_not_found"
    assert "'top_k'" in "\n".join(errors[1:])
