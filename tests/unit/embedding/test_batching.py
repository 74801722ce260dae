"""The query micro-batcher: concurrent queries share one encoder call, each caller gets
its own embedding or the batch's error, batches are capped, a lone query is not held
back longer than the window, and shutdown encodes what is queued, then refuses.

The encoder here blocks its first call until released, so that the queries submitted
meanwhile provably arrive while a batch runs: the batches are then known exactly."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future

import pytest

from hsearch.embedding.batching import QueryBatcher
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedding
from hsearch.errors import EncoderError

WAIT_S = 10.0  # the most a test waits for something that should happen at once


class GatedEmbedder(FakeEmbedder):
    """The fake encoder, recording each batch call; while ``gate`` is closed, a call
    waits for it (after signalling ``entered``)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[list[str], bool, bool]] = []
        self.call_times: list[float] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail_on: str | None = None

    def embed_queries(
        self, texts: Sequence[str], *, dense: bool = True, sparse: bool = True
    ) -> list[Embedding]:
        self.call_times.append(time.monotonic())
        self.calls.append((list(texts), dense, sparse))
        self.entered.set()
        assert self.gate.wait(WAIT_S), "the test never opened the gate"
        if self.fail_on is not None and self.fail_on in texts:
            raise EncoderError(f"cannot encode {self.fail_on!r}")
        return super().embed_queries(texts, dense=dense, sparse=sparse)


@pytest.fixture
def embedder() -> GatedEmbedder:
    return GatedEmbedder()


@pytest.fixture
def batcher(embedder: GatedEmbedder) -> Iterator[QueryBatcher]:
    batcher = QueryBatcher(embedder, max_batch=32)
    yield batcher
    embedder.gate.set()
    batcher.close(timeout_s=WAIT_S)


def hold_first_batch(embedder: GatedEmbedder, batcher: QueryBatcher) -> Future[Embedding]:
    """Start a batch with ``"first"`` and keep it running until the gate opens."""
    embedder.gate.clear()
    first = batcher.submit("first")
    assert embedder.entered.wait(WAIT_S)
    return first


def test_queries_arriving_during_a_batch_share_the_next_call_in_order(
    embedder: GatedEmbedder, batcher: QueryBatcher
) -> None:
    first = hold_first_batch(embedder, batcher)
    texts = [f"query number {i}" for i in range(10)]
    futures = [batcher.submit(text) for text in texts]
    embedder.gate.set()
    results = [f.result(WAIT_S) for f in futures]
    reference = FakeEmbedder()
    assert first.result(WAIT_S) == reference.embed_query("first")
    assert results == [reference.embed_query(text) for text in texts]
    assert [call[0] for call in embedder.calls] == [["first"], texts]
    assert batcher.stats.calls == 2
    assert batcher.stats.sizes == [1, 10]


def test_a_batch_holds_at_most_max_batch_queries(embedder: GatedEmbedder) -> None:
    batcher = QueryBatcher(embedder, max_batch=3)
    try:
        hold_first_batch(embedder, batcher)
        futures = [batcher.submit(f"q{i}") for i in range(7)]
        embedder.gate.set()
        for f in futures:
            f.result(WAIT_S)
    finally:
        batcher.close(timeout_s=WAIT_S)
    assert [call[0] for call in embedder.calls] == [
        ["first"],
        ["q0", "q1", "q2"],
        ["q3", "q4", "q5"],
        ["q6"],
    ]
    assert batcher.stats.largest == 3


def test_an_encoder_error_reaches_every_caller_of_its_batch_only(
    embedder: GatedEmbedder, batcher: QueryBatcher
) -> None:
    hold_first_batch(embedder, batcher)
    embedder.fail_on = "boom"
    doomed = [batcher.submit(text) for text in ("a", "boom", "b")]
    embedder.gate.set()
    for future in doomed:
        with pytest.raises(EncoderError, match="cannot encode 'boom'"):
            future.result(WAIT_S)
    # The thread survives: the next query is encoded.
    assert batcher.submit("after").result(WAIT_S) == FakeEmbedder().embed_query("after")


def test_a_wrong_number_of_embeddings_is_an_error_for_each_caller(
    batcher: QueryBatcher, embedder: GatedEmbedder
) -> None:
    def short(texts: Sequence[str], *, dense: bool = True, sparse: bool = True) -> list[Embedding]:
        return []

    embedder.embed_queries = short  # type: ignore[method-assign]  # broken on purpose
    with pytest.raises(EncoderError, match="returned 0 embeddings for 1 queries"):
        batcher.submit("x").result(WAIT_S)


def test_each_combination_of_sides_is_its_own_call(
    embedder: GatedEmbedder, batcher: QueryBatcher
) -> None:
    hold_first_batch(embedder, batcher)
    both = batcher.submit("red fox")
    dense = batcher.submit("blue fox", sparse=False)
    sparse = batcher.submit("green fox", dense=False)
    also_both = batcher.submit("grey fox")
    embedder.gate.set()
    reference = FakeEmbedder()
    assert both.result(WAIT_S) == reference.embed_query("red fox")
    assert dense.result(WAIT_S) == reference.embed_query("blue fox", sparse=False)
    assert sparse.result(WAIT_S) == reference.embed_query("green fox", dense=False)
    assert also_both.result(WAIT_S) == reference.embed_query("grey fox")
    assert embedder.calls[1:] == [
        (["red fox", "grey fox"], True, True),
        (["blue fox"], True, False),
        (["green fox"], False, True),
    ]
    with pytest.raises(ValueError, match="dense side, the sparse side or both"):
        batcher.submit("x", dense=False, sparse=False)


def test_the_same_text_twice_in_a_batch_is_encoded_once(
    embedder: GatedEmbedder, batcher: QueryBatcher
) -> None:
    hold_first_batch(embedder, batcher)
    futures = [batcher.submit(text) for text in ("same", "other", "same")]
    embedder.gate.set()
    results = [f.result(WAIT_S) for f in futures]
    assert results[0] == results[2] == FakeEmbedder().embed_query("same")
    assert embedder.calls[1][0] == ["same", "other"]
    assert batcher.stats.queries == 4  # per caller


def test_a_cancelled_query_is_left_out_of_its_batch(
    embedder: GatedEmbedder, batcher: QueryBatcher
) -> None:
    hold_first_batch(embedder, batcher)
    kept = batcher.submit("kept")
    dropped = batcher.submit("dropped")
    assert dropped.cancel()
    embedder.gate.set()
    kept.result(WAIT_S)
    assert embedder.calls[1][0] == ["kept"]


def test_a_lone_query_waits_at_most_the_window(embedder: GatedEmbedder) -> None:
    window = 0.3
    batcher = QueryBatcher(embedder, window_s=window)
    try:
        submitted = time.monotonic()
        batcher.submit("alone").result(WAIT_S)
    finally:
        batcher.close(timeout_s=WAIT_S)
    waited = embedder.call_times[0] - submitted
    # It waited for company (the window is applied), and not much longer than that.
    assert window * 0.9 <= waited < window + 0.5


def test_without_a_window_a_lone_query_starts_at_once(embedder: GatedEmbedder) -> None:
    batcher = QueryBatcher(embedder, window_s=0.0)
    try:
        submitted = time.monotonic()
        batcher.submit("alone").result(WAIT_S)
    finally:
        batcher.close(timeout_s=WAIT_S)
    assert embedder.call_times[0] - submitted < 0.25


def test_a_full_batch_does_not_wait_out_the_window(embedder: GatedEmbedder) -> None:
    batcher = QueryBatcher(embedder, window_s=WAIT_S * 3, max_batch=3)
    try:
        futures = [batcher.submit(f"q{i}") for i in range(3)]
        for f in futures:
            f.result(WAIT_S)  # would time out if the batch waited for its window
    finally:
        batcher.close(timeout_s=WAIT_S)
    assert embedder.calls[0][0] == ["q0", "q1", "q2"]


def test_queries_that_arrived_during_a_batch_do_not_wait_for_the_window(
    embedder: GatedEmbedder,
) -> None:
    batcher = QueryBatcher(embedder, window_s=WAIT_S * 3, max_batch=2)
    try:
        embedder.gate.clear()
        full = [batcher.submit("a"), batcher.submit("b")]  # a full batch starts at once
        assert embedder.entered.wait(WAIT_S)
        later = batcher.submit("c")  # arrives while that batch runs
        embedder.gate.set()
        for f in [*full, later]:
            f.result(WAIT_S)  # "c" would time out if it waited for its window
    finally:
        batcher.close(timeout_s=WAIT_S)
    assert [call[0] for call in embedder.calls] == [["a", "b"], ["c"]]


def test_close_encodes_what_is_queued_then_refuses(
    embedder: GatedEmbedder, batcher: QueryBatcher
) -> None:
    first = hold_first_batch(embedder, batcher)
    queued = [batcher.submit(f"q{i}") for i in range(3)]
    closing = threading.Thread(target=batcher.close, kwargs={"timeout_s": WAIT_S})
    closing.start()
    embedder.gate.set()
    closing.join(WAIT_S)
    assert not closing.is_alive()
    assert first.done()
    assert all(f.result(0) == FakeEmbedder().embed_query(f"q{i}") for i, f in enumerate(queued))
    assert batcher.closed
    assert not any(
        t.name == "hsearch-query-encoder" and t.is_alive() for t in threading.enumerate()
    )
    with pytest.raises(EncoderError, match="shut down"):
        batcher.submit("late")
    batcher.close()  # again: nothing to do


def test_no_thread_until_the_first_query() -> None:
    before = {t.ident for t in threading.enumerate()}
    batcher = QueryBatcher(FakeEmbedder())
    assert {t.ident for t in threading.enumerate()} == before
    batcher.close()


async def test_coroutines_await_their_own_results(
    embedder: GatedEmbedder, batcher: QueryBatcher
) -> None:
    first = hold_first_batch(embedder, batcher)
    texts = [f"concurrent query {i}" for i in range(10)]
    tasks = [asyncio.create_task(batcher.embed_query(text)) for text in texts]
    await asyncio.sleep(0)  # each task runs up to its await: every query is queued
    embedder.gate.set()
    results = await asyncio.gather(*tasks)
    reference = FakeEmbedder()
    assert list(results) == [reference.embed_query(text) for text in texts]
    assert first.result(WAIT_S) == reference.embed_query("first")
    assert [call[0] for call in embedder.calls] == [["first"], texts]


async def test_a_cancelled_coroutine_drops_its_query(
    embedder: GatedEmbedder, batcher: QueryBatcher
) -> None:
    first = hold_first_batch(embedder, batcher)
    task = asyncio.create_task(batcher.embed_query("abandoned"))
    await asyncio.sleep(0)  # the task submits its query
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    embedder.gate.set()
    first.result(WAIT_S)
    assert await batcher.embed_query("next") == FakeEmbedder().embed_query("next")
    assert [call[0] for call in embedder.calls] == [["first"], ["next"]]


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="window_s"):
        QueryBatcher(FakeEmbedder(), window_s=-1.0)
    with pytest.raises(ValueError, match="max_batch"):
        QueryBatcher(FakeEmbedder(), max_batch=0)


async def test_a_callers_next_query_waits_for_the_window_like_any_lone_query(
    embedder: GatedEmbedder,
) -> None:
    # A caller that sends its next query as soon as it has the answer finds the thread
    # idle: that query waits for company too (the thread marks itself idle before it
    # answers).
    window = 0.05
    batcher = QueryBatcher(embedder, window_s=window)
    try:
        waits = []
        for i in range(5):
            submitted = time.monotonic()
            await batcher.embed_query(f"q{i}")
            waits.append(embedder.call_times[-1] - submitted)
    finally:
        batcher.close(timeout_s=WAIT_S)
    assert min(waits) >= window * 0.9


class Stop(BaseException):
    """Not an encoder error: what would end the encoder thread."""


def test_a_thread_ended_by_a_base_exception_leaves_no_caller_waiting(
    embedder: GatedEmbedder, batcher: QueryBatcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = hold_first_batch(embedder, batcher)
    queued = batcher.submit("queued")

    def stop(*_: object, **__: object) -> list[Embedding]:
        raise Stop

    monkeypatch.setattr(embedder, "embed_queries", stop)
    # The thread's end is reported by threading's excepthook: keep it quiet here.
    monkeypatch.setattr(threading, "excepthook", lambda _args: None)
    embedder.gate.set()  # "first" completes; "queued" meets the failing encoder
    assert first.result(WAIT_S) == FakeEmbedder().embed_query("first")
    with pytest.raises(EncoderError, match="stopped"):
        queued.result(WAIT_S)
    with pytest.raises(EncoderError, match="shut down"):
        batcher.submit("later")
