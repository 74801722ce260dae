"""`hsearch run` (what `make run` starts) on embedded defaults: SQLite metadata, the
SQLite-backed broker with a real worker process, a Milvus Lite server. It ingests the
sample corpus, serves a search, and Ctrl-C leaves no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from hsearch.processes import free_port, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def test_run_serves_the_sample_and_stops_cleanly(tmp_path: Path) -> None:
    api_port, milvus_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HSEARCH_")}
    env.update(
        {
            "HSEARCH_DATA_DIR": str(tmp_path / "data"),
            "HSEARCH_API__PORT": str(api_port),
            "HSEARCH_MILVUS__LITE_PORT": str(milvus_port),
            "HSEARCH_ENCODER__KIND": "offline",
        }
    )
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hsearch.cli", "run"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    children: list[psutil.Process] = []
    try:
        wait_until(
            lambda: "ready." in log.read_text(), timeout=300, what="hsearch run", proc=proc, log=log
        )
        text = log.read_text()
        assert "sample ingest succeeded: 16 indexed" in text
        assert "encoder: offline" in text
        assert f"http://127.0.0.1:{api_port}/docs" in text
        assert "curl -s -X POST" in text

        resp = httpx.post(
            f"http://127.0.0.1:{api_port}/v1/search",
            json={"query": "Where is the capital of Japan? 日本の首都", "top_k": 3},
            timeout=30,
        )
        assert resp.status_code == 200
        assert resp.json()["hits"][0]["external_id"] == "tokyo-ja"

        children = psutil.Process(proc.pid).children(recursive=True)
        names = " ".join(" ".join(c.cmdline()) for c in children)
        assert "milvus_lite" in names
        assert "celery" in names
        assert "uvicorn" in names

        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        _, alive = psutil.wait_procs(children, timeout=30)
        assert alive == [], f"left behind: {[c.cmdline() for c in alive]}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for child in children:  # only what this `hsearch run` started
            if child.is_running():
                child.kill()
