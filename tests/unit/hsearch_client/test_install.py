"""The package installs on its own: ``pip install clients/python`` into a fresh virtual
environment brings httpx and pydantic and nothing of the server (no torch, pymilvus,
sqlalchemy, no hsearch), and the installed copy works there, with this checkout out of
its path. pip reaches the package index the machine's pip configuration names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.process, pytest.mark.timeout(600)]

PACKAGE = Path(__file__).resolve().parents[3] / "clients" / "python"
SERVER_ONLY = {"torch", "pymilvus", "sqlalchemy", "hsearch", "fastapi", "celery", "milvus-lite"}

SCRIPT = """
import json, httpx, hsearch_client
from hsearch_client import Client
from hsearch_client.errors import DocumentNotFoundError

def handler(request):
    if request.url.path == "/v1/search":
        body = {"query": "q", "mode": "hybrid", "method": "rrf", "top_k": 1, "total": 1,
                "hits": [{"chunk_id": "c", "document_id": "d", "external_id": "e",
                          "score": 1.0}]}
        return httpx.Response(200, json=body)
    return httpx.Response(404, json={"error": "document_not_found", "detail": "no"})

client = Client("http://api.test", transport=httpx.MockTransport(handler))
hit = client.search("q").hits[0]
try:
    client.get_document("x")
except DocumentNotFoundError as exc:
    code = exc.code
print(json.dumps({"file": hsearch_client.__file__, "hit": hit.external_id, "code": code}))
"""


def test_the_package_installs_alone_in_a_fresh_environment(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "--quiet", str(PACKAGE)], check=True, env=env, timeout=540)

    listed = subprocess.run(
        [*pip, "list", "--format", "json"], check=True, env=env, capture_output=True, text=True
    )
    installed = {p["name"].lower().replace("_", "-") for p in json.loads(listed.stdout)}
    assert {"hsearch-client", "httpx", "pydantic"} <= installed
    assert installed.isdisjoint(SERVER_ONLY), installed & SERVER_ONLY

    ran = subprocess.run(
        [str(python), "-c", SCRIPT],
        check=True,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    result = json.loads(ran.stdout)
    assert Path(result["file"]).is_relative_to(venv), "the installed copy, not this checkout"
    assert (result["hit"], result["code"]) == ("e", "document_not_found")
