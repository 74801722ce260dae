"""`hsearch run` (what `make run` starts) on embedded defaults: SQLite metadata, the
SQLite-backed broker with a real worker process, a Milvus Lite server. It ingests the
sample corpus, serves a search, starts a killed worker again while the API keeps
serving, and Ctrl-C in the middle of a job leaves no process behind within 5 s."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from hsearch.local.processes import free_port, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def test_run_serves_the_sample_and_stops_cleanly(tmp_path: Path) -> None:
    api_port, milvus_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HSEARCH_")}
    data_dir = tmp_path / "data"
    env.update(
        {
            "HSEARCH_DATA_DIR": str(data_dir),
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
        assert "authorization: Bearer $HSEARCH_API_KEY" in text
        # The printed key works, and is the only way in.
        keys = re.findall(r"export HSEARCH_API_KEY=(hsk_\S+)", text)
        assert len(keys) == 1, text
        auth = {"Authorization": f"Bearer {keys[0]}"}
        assert (data_dir / "run-api-key").read_text().strip() == keys[0]
        assert keys[0] not in (data_dir / "logs" / "worker-0.log").read_text()
        refused = httpx.post(f"http://127.0.0.1:{api_port}/v1/search", json={"query": "x"})
        assert refused.status_code == 401

        resp = httpx.post(
            f"http://127.0.0.1:{api_port}/v1/search",
            json={"query": "Where is the capital of Japan? 日本の首都", "top_k": 3},
            headers=auth,
            timeout=30,
        )
        assert resp.status_code == 200
        assert resp.json()["hits"][0]["external_id"] == "tokyo-ja"

        children = psutil.Process(proc.pid).children(recursive=True)
        names = " ".join(" ".join(c.cmdline()) for c in children)
        assert "milvus_lite" in names
        assert "celery" in names
        assert "uvicorn" in names

        # A worker killed outright (one process: it runs its tasks itself) is started
        # again, and the API keeps serving meanwhile.
        (worker,) = [c for c in children if c.ppid() == proc.pid and "celery" in c.cmdline()]
        os.killpg(worker.pid, signal.SIGKILL)
        wait_until(
            lambda: "worker-0 exited with code -9; starting it again" in log.read_text(),
            timeout=30,
            what="the dead worker noticed",
            proc=proc,
            log=log,
        )
        search = httpx.post(
            f"http://127.0.0.1:{api_port}/v1/search", json={"query": "Tokyo"}, headers=auth
        )
        assert search.status_code == 200
        documents = [
            {"external_id": f"d{i}", "text": f"Rivers and mountains, part {i}. " * 30}
            for i in range(300)
        ]
        accepted = httpx.post(
            f"http://127.0.0.1:{api_port}/v1/documents",
            json={"documents": documents},
            headers=auth,
            timeout=30,
        )
        assert accepted.status_code == 202, accepted.text
        status_url = f"http://127.0.0.1:{api_port}{accepted.json()['status_url']}"

        def indexing() -> bool:
            job = httpx.get(status_url, headers=auth, timeout=10).json()
            return bool(job["status"] == "running" and 0 < job["indexed"] < job["total"])

        wait_until(indexing, timeout=180, what="the new worker indexing", proc=proc, log=log)

        children = psutil.Process(proc.pid).children(recursive=True)
        interrupted = time.monotonic()
        proc.send_signal(signal.SIGINT)  # Ctrl-C, in the middle of the job
        assert proc.wait(60) == 0
        _, alive = psutil.wait_procs(children, timeout=30)
        stopped = time.monotonic() - interrupted
        assert alive == [], f"left behind: {[c.cmdline() for c in alive]}"
        assert stopped < 5.0, f"every process gone {stopped:.1f} s after Ctrl-C"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for child in children:  # only what this `hsearch run` started
            if child.is_running():
                child.kill()
