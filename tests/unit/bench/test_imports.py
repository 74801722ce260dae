"""Every benchmark module imports: a benchmark no test runs still fails here when a
module it reuses moves."""

from __future__ import annotations

import importlib
import pkgutil

import bench
import pytest

MODULES = sorted(m.name for m in pkgutil.iter_modules(bench.__path__))


def test_the_benchmarks_are_all_listed() -> None:
    assert {"flush", "filtered_recall", "ingest", "relevance", "compare"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_the_benchmark_imports(name: str) -> None:
    importlib.import_module(f"bench.{name}")
