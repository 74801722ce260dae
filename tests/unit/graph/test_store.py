"""Tenants' graphs per data version: one build per version however many searches wait,
a search past its deadline served the version before, an older build finishing late
never replacing a newer graph."""

from __future__ import annotations

import asyncio
import threading

import pytest

from hsearch.errors import GraphUnavailableError
from hsearch.graph.csr import LinkGraph
from hsearch.graph.store import GraphStore


class Builds:
    """Builds graphs of one link whose type names the build; each waits for its gate."""

    def __init__(self) -> None:
        self.count = 0
        self.gates: list[threading.Event] = []
        self.entered = threading.Condition()

    def __call__(self, tenant_id: str) -> tuple[LinkGraph, tuple[str, ...]]:
        gate = threading.Event()
        with self.entered:
            self.count += 1
            self.gates.append(gate)
            self.entered.notify_all()
        gate.wait(30)
        graph = LinkGraph.from_edges(["a", "b"], [("a", "b", f"build{self.count}", 1.0)])
        return graph, ("a", "b")


def store(builds: Builds) -> GraphStore:
    return GraphStore(None, max_links=10, build=builds)  # type: ignore[arg-type]  # never read


async def started(builds: Builds, count: int) -> None:
    """Until ``count`` builds have started (each waits at its gate)."""

    def wait() -> None:
        with builds.entered:
            assert builds.entered.wait_for(lambda: len(builds.gates) >= count, timeout=30)

    await asyncio.to_thread(wait)


async def released(builds: Builds, index: int) -> None:
    await started(builds, index + 1)
    builds.gates[index].set()


async def test_one_build_per_version_and_the_version_before_past_a_deadline() -> None:
    builds = Builds()
    graphs = store(builds)
    first = [asyncio.create_task(graphs.graph("t", "v1", timeout=30)) for _ in range(3)]
    await released(builds, 0)
    held = await asyncio.gather(*first)
    assert builds.count == 1
    assert {h.graph.types for h in held} == {("build1",)}
    # A new version still building: a search that cannot wait gets the version before.
    stale = await graphs.graph("t", "v2", timeout=0.05)
    await started(builds, 2)
    assert (stale.version, stale.graph.types) == ("v1", ("build1",))
    await released(builds, 1)
    fresh = await graphs.graph("t", "v2", timeout=30)
    assert (fresh.version, builds.count) == ("v2", 2)


async def test_with_no_version_before_the_leg_is_unavailable() -> None:
    builds = Builds()
    graphs = store(builds)
    with pytest.raises(GraphUnavailableError, match="still being built"):
        await graphs.graph("t", "v1", timeout=0.05)
    await released(builds, 0)


async def test_an_older_build_finishing_late_does_not_replace_a_newer_graph() -> None:
    builds = Builds()
    graphs = store(builds)
    older = asyncio.create_task(graphs.graph("t", "v1", timeout=30))
    await started(builds, 1)  # the older build has started: the newer one starts second
    newer = asyncio.create_task(graphs.graph("t", "v2", timeout=30))
    await released(builds, 1)  # the newer build (second started) finishes first
    assert (await newer).version == "v2"
    builds.gates[0].set()
    assert (await older).version == "v1"  # its own searches get what they waited for
    held = await graphs.graph("t", "v2", timeout=30)
    assert (held.version, builds.count) == ("v2", 2)
