"""Multiprocess mode: samples recorded by several processes are added up by whichever
process answers the scrape; a fresh directory starts from nothing; scrape-time figures
are written beside them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hsearch.metrics.exposition import (
    MULTIPROC_ENV,
    ScrapeFigures,
    aggregated_families,
    prepare_multiprocess_dir,
    process_exited,
    render,
)
from hsearch.metrics.summary import search_figures, search_samples

RECORD = """
from hsearch.metrics.instruments import record_ingest, record_search
record_ingest(outcome="indexed", documents={n}, chunks={n})
record_search(tenant="t", mode="hybrid", outcome="ok", legs=[("dense", "ok", 5.0)])
"""


def record_in_child(directory: Path, n: int) -> int:
    env = {**os.environ, MULTIPROC_ENV: str(directory)}
    proc = subprocess.run(
        [sys.executable, "-c", RECORD.format(n=n)], env=env, check=True, capture_output=True
    )
    assert proc.returncode == 0
    return n


@pytest.mark.process
def test_samples_of_every_process_are_added_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = prepare_multiprocess_dir(tmp_path / "metrics")
    record_in_child(directory, 2)
    record_in_child(directory, 3)
    monkeypatch.setenv(MULTIPROC_ENV, str(directory))

    text = render().decode()
    assert 'hsearch_ingest_documents_total{outcome="indexed"} 5.0' in text
    assert "hsearch_ingest_chunks_total 5.0" in text
    figures = search_figures(search_samples(aggregated_families()))
    assert figures.searches == 2
    assert figures.legs["dense"].count == 2
    process_exited(12345)  # a process that never wrote: nothing to remove, no error


@pytest.mark.process
def test_a_prepared_directory_starts_empty(tmp_path: Path) -> None:
    directory = tmp_path / "metrics"
    record_in_child(prepare_multiprocess_dir(directory), 1)
    assert list(directory.iterdir())
    prepare_multiprocess_dir(directory)
    assert list(directory.iterdir()) == []


def test_scrape_figures_are_gauges_beside_the_recorded_ones() -> None:
    text = render(
        ScrapeFigures(
            version="9.9",
            encoder="fake:1",
            dependencies={"database": True, "broker": False},
            jobs={"queued": 2, "running": 1},
            queue_depth={"ingest": 4},
        )
    ).decode()
    assert 'hsearch_build_info{encoder="fake:1",version="9.9"} 1.0' in text
    assert 'hsearch_dependency_up{component="broker"} 0.0' in text
    assert 'hsearch_dependency_up{component="database"} 1.0' in text
    assert 'hsearch_jobs{status="queued"} 2.0' in text
    assert 'hsearch_queue_depth{queue="ingest"} 4.0' in text


def test_figures_that_could_not_be_read_are_left_out() -> None:
    text = render(ScrapeFigures(version="1", encoder="e", jobs=None, queue_depth=None)).decode()
    assert "hsearch_build_info" in text
    assert "hsearch_jobs{" not in text
    assert "hsearch_queue_depth{" not in text
