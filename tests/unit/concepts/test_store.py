"""ConceptStore: one build per tenant and version however many wait, the version before
past a deadline while a newer one builds, a failed build as ConceptsUnavailableError,
its status and progress, forget."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from hsearch.concepts.index import ConceptRow, Progress
from hsearch.concepts.store import ConceptStore
from hsearch.errors import ConceptsUnavailableError

ROWS = [
    ConceptRow("d1", "a", "A", ("c1", "c2"), (("lava", "magma"), ("lava", "magma", "ash"))),
    ConceptRow("d2", "b", "B", ("c3",), (("magma", "ash"),)),
]


class Reader:
    """Rows for the store, counting reads; a read of a version in ``held`` waits until
    the test releases it."""

    def __init__(self) -> None:
        self.reads = 0
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail = False

    def __call__(self, tenant_id: str, progress: Progress) -> Sequence[ConceptRow]:
        self.reads += 1
        progress("reading", 0.5)
        self.entered.set()
        assert self.gate.wait(30)
        if self.fail:
            raise RuntimeError("broken rows")
        return ROWS


def store(reader: Reader) -> ConceptStore:
    return ConceptStore(sessions=None, read=reader)  # type: ignore[arg-type]  # never read


async def test_one_build_per_version_however_many_wait() -> None:
    reader = Reader()
    concepts = store(reader)
    assert concepts.status("t").state == "none"
    first, second = await asyncio.gather(
        concepts.index("t", "v1", timeout=30), concepts.index("t", "v1", timeout=30)
    )
    assert first is second
    assert reader.reads == 1
    assert await concepts.index("t", "v1", timeout=30) is first
    assert reader.reads == 1
    status = concepts.status("t")
    assert (status.state, status.version, status.chunks, status.concepts) == ("ready", "v1", 3, 3)
    assert status.communities == {0: 1}
    assert status.links == 3


async def test_the_version_before_is_served_past_a_deadline() -> None:
    reader = Reader()
    concepts = store(reader)
    v1 = await concepts.index("t", "v1", timeout=30)
    reader.gate.clear()
    reader.entered.clear()
    # v2's build waits for the gate: past its deadline the caller gets v1.
    assert await concepts.index("t", "v2", timeout=0.05) is v1
    await asyncio.to_thread(reader.entered.wait, 30)
    status = concepts.status("t")
    assert (status.state, status.version, status.building) == ("building", "v1", "v2")
    assert (status.stage, status.fraction) == ("reading", 0.5)
    # With nothing held for another tenant, the same wait is an error.
    with pytest.raises(ConceptsUnavailableError, match="still being built"):
        await concepts.index("other", "v1", timeout=0.05)
    reader.gate.set()
    v2 = await concepts.index("t", "v2", timeout=30)
    assert v2.version == "v2"
    assert reader.reads == 3  # v1, v2 and the other tenant's: one each
    assert concepts.status("t").state == "ready"


async def test_a_failed_build_is_concepts_unavailable_and_shown() -> None:
    reader = Reader()
    reader.fail = True
    concepts = store(reader)
    with pytest.raises(ConceptsUnavailableError, match="RuntimeError: broken rows"):
        await concepts.index("t", "v1", timeout=30)
    assert concepts.status("t").error is not None
    reader.fail = False
    assert (await concepts.index("t", "v1", timeout=30)).version == "v1"
    assert concepts.status("t").error is None


async def test_a_late_build_finishes_and_forget_drops_the_tenant() -> None:
    reader = Reader()
    concepts = store(reader)
    await concepts.index("t", "v1", timeout=30)
    reader.gate.clear()
    await concepts.index("t", "v2", timeout=0.01)
    reader.gate.set()
    await concepts.index("t", "v2", timeout=30)
    assert concepts.status("t").state == "ready"
    concepts.forget("t")
    assert concepts.status("t").state == "none"
