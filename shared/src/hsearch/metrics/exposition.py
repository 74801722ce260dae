"""One scrape sees every process: prometheus-client's multiprocess mode.

The API runs several uvicorn workers and a Celery worker several pool processes; a
scrape reaches one process. With ``PROMETHEUS_MULTIPROC_DIR`` set in the environment
of every process *before it starts* (prometheus-client reads it when it is imported),
each process writes its samples to memory-mapped files there, and whichever process
answers a scrape adds up every file (:func:`aggregated_families`). The directory is
emptied when the stack starts (:func:`prepare_multiprocess_dir`: ``hsearch run``, the
test suite, an ``emptyDir`` volume in a pod) and a process that exits is marked dead
(:func:`process_exited`). On one machine the API's ``/metrics`` serves the worker's
samples too, from the shared directory; across machines each pod exposes its own (the
worker on ``metrics.worker_port``: :func:`start_worker_server`).

Some figures are read when scraped, not recorded: job states and queue depth (from the
metadata database and the broker) and dependency health (the readiness probe); the
caller reads them, under a timeout, into :class:`ScrapeFigures`, and :func:`render`
writes them beside the recorded ones.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    generate_latest,
    multiprocess,
    start_http_server,
)
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "CONTENT_TYPE",
    "MULTIPROC_ENV",
    "ScrapeFigures",
    "aggregated_families",
    "multiprocess_dir",
    "prepare_multiprocess_dir",
    "process_exited",
    "render",
    "start_worker_server",
]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def multiprocess_dir() -> Path | None:
    """The directory every process writes its samples to, or None (one process).

    prometheus-client's own switch, read by the library when it is imported, so it is
    an environment variable of the process and not a setting of ours."""
    value = os.environ.get(MULTIPROC_ENV)
    return Path(value) if value else None


def prepare_multiprocess_dir(path: Path) -> Path:
    """Create ``path`` empty (samples of an earlier run would be added to this one's):
    call it before the processes that write there start."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def process_exited(pid: int) -> None:
    """Tell the multiprocess files that ``pid`` has exited (its live gauges go; its
    counters and histograms stay in the totals, as Prometheus expects of counters)."""
    if multiprocess_dir() is not None:
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]  # untyped library function


def _aggregated_registry() -> CollectorRegistry:
    if multiprocess_dir() is None:
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # untyped
    return registry


def aggregated_families() -> list[Metric]:
    """Every recorded metric, added up over all processes that share the directory (or
    this process's, outside multiprocess mode)."""
    return list(_aggregated_registry().collect())


@dataclass(frozen=True, slots=True)
class ScrapeFigures:
    """What a scrape reads from the outside world; None when it could not be read in
    time (the metric is then left out of that scrape rather than reported wrong)."""

    version: str
    encoder: str
    dependencies: Mapping[str, bool] = field(default_factory=dict)
    jobs: Mapping[str, int] | None = None
    queue_depth: Mapping[str, int] | None = None


class _Figures(Collector):
    def __init__(self, figures: ScrapeFigures) -> None:
        self._figures = figures

    def collect(self) -> Iterator[Metric]:
        f = self._figures
        info = GaugeMetricFamily(
            "hsearch_build_info", "The running version and encoder.", labels=["version", "encoder"]
        )
        info.add_metric([f.version, f.encoder], 1)
        yield info
        yield _gauge(
            "hsearch_dependency_up",
            "Whether a dependency answered the readiness probe (1) or not (0).",
            "component",
            {name: 1 if up else 0 for name, up in f.dependencies.items()},
        )
        if f.jobs is not None:
            yield _gauge(
                "hsearch_jobs", "Jobs in the metadata database by status.", "status", f.jobs
            )
        if f.queue_depth is not None:
            yield _gauge(
                "hsearch_queue_depth",
                "Messages waiting in the broker, by queue.",
                "queue",
                f.queue_depth,
            )


def _gauge(name: str, doc: str, label: str, values: Mapping[str, int]) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(name, doc, labels=[label])
    for key, value in sorted(values.items()):
        gauge.add_metric([key], value)
    return gauge


def render(figures: ScrapeFigures | None = None) -> bytes:
    """The text exposition of every recorded metric (all processes) and of ``figures``."""
    out = generate_latest(_aggregated_registry())
    if figures is not None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Figures(figures))
        out += generate_latest(registry)
    return out


def start_worker_server(port: int, *, host: str) -> None:
    """Serve the samples of every process sharing the directory on ``host:port`` (a
    daemon thread of the calling process): the worker's endpoint."""
    start_http_server(port, addr=host, registry=_aggregated_registry())
