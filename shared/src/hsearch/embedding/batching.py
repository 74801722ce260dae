"""Micro-batching of query encoding: concurrent queries share one model call.

A search encodes its query before anything else, and a transformer encodes ten short
queries in one forward pass in far less than ten times the time of one. The
:class:`QueryBatcher` owns one encoder thread; callers hand it queries
(:meth:`QueryBatcher.submit`, or :meth:`QueryBatcher.embed_query` from a coroutine)
and each gets its own embedding back. The thread encodes what is waiting in one
:meth:`Embedder.embed_queries` call per combination of sides asked for:

* when it is idle, a query starts a batch at once (with ``window_s`` = 0), or after
  waiting at most ``window_s`` for company: a lone query is never delayed by more;
* while a batch runs, the queries that arrive wait for it and form the next batch,
  which starts as soon as it ends (no window: they have waited already), up to
  ``max_batch`` of them (the rest wait for the one after).

Under load batches form by themselves, with no timer; when the encoder is idle a query
pays nothing, or at most the window. An error of the encoder reaches every caller of
that batch; a caller that gave up (a cancelled future) is left out of the batch it
would have joined. :meth:`QueryBatcher.close` encodes what is queued, then stops the
thread; later submissions are refused.

Only the batcher's thread calls the encoder's query methods; the encoders run every
model call on the process's one model thread (:mod:`hsearch.embedding.model_thread`),
whoever calls them (ingestion in the same process too).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from hsearch.embedding.protocol import Embedder, Embedding, check_sides
from hsearch.errors import EncoderError

__all__ = ["BatcherStats", "QueryBatcher"]


@dataclass(slots=True)
class BatcherStats:
    """What the encoder thread did, for tests and the encoding benchmark."""

    queries: int = 0
    """Queries encoded (duplicates within a batch counted once per caller)."""
    calls: int = 0
    """Encoder calls (:meth:`Embedder.embed_queries`) made."""
    largest: int = 0
    """The most queries taken in one batch."""
    sizes: list[int] = field(default_factory=list)
    """Each batch's size, in order (the first ``_MAX_SIZES`` batches)."""


_MAX_SIZES = 10_000


_Outcome = Embedding | Exception


@dataclass(slots=True)
class _Pending:
    text: str
    dense: bool
    sparse: bool
    future: Future[Embedding]
    arrived: float


class QueryBatcher:
    """Encodes queries on one thread of its own, concurrent ones in shared model calls.

    Args:
        embedder: The encoder; only this batcher's thread calls its query methods.
        window_s: How long a query arriving at an idle encoder waits for others
            before its batch starts (0: it starts at once).
        max_batch: The most queries in one batch.
    """

    def __init__(self, embedder: Embedder, *, window_s: float = 0.0, max_batch: int = 32) -> None:
        if not window_s >= 0.0:
            msg = f"window_s must be >= 0, got {window_s!r}"
            raise ValueError(msg)
        if isinstance(max_batch, bool) or max_batch < 1:
            msg = f"max_batch must be >= 1, got {max_batch!r}"
            raise ValueError(msg)
        self._embedder = embedder
        self._window_s = window_s
        self._max_batch = max_batch
        self._pending: deque[_Pending] = deque()
        self._wake = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._idle_since = time.monotonic()
        """When the last batch ended: a query that arrived later found the thread idle."""
        self.stats = BatcherStats()

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    @property
    def window_s(self) -> float:
        return self._window_s

    @property
    def max_batch(self) -> int:
        return self._max_batch

    def submit(self, text: str, *, dense: bool = True, sparse: bool = True) -> Future[Embedding]:
        """Queue ``text`` for encoding; the future holds its embedding (or the error).

        The encoder thread starts with the first submission (a process that never
        searches, a worker, starts none).

        Raises:
            ValueError: Neither side asked for.
            EncoderError: The batcher is closed.
        """
        check_sides(dense=dense, sparse=sparse)
        future: Future[Embedding] = Future()
        with self._wake:
            if self._closed:
                msg = "the query encoder is shut down"
                raise EncoderError(msg)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="hsearch-query-encoder", daemon=True
                )
                self._thread.start()
            self._pending.append(_Pending(text, dense, sparse, future, time.monotonic()))
            self._wake.notify()
        return future

    async def embed_query(self, text: str, *, dense: bool = True, sparse: bool = True) -> Embedding:
        """:meth:`submit` awaited on the running (asyncio) event loop, which no thread
        blocks on meanwhile; a cancelled caller's query is dropped if not yet begun."""
        return await asyncio.wrap_future(self.submit(text, dense=dense, sparse=sparse))

    def close(self, *, timeout_s: float | None = None) -> None:
        """Refuse new queries, encode those queued, and wait for the thread to end
        (at most ``timeout_s``). Idempotent."""
        with self._wake:
            self._closed = True
            self._wake.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- the encoder thread -------------------------------------------------------------

    def _run(self) -> None:
        batch: list[_Pending] = []
        try:
            self._serve(batch)
        except BaseException:
            # Not an encoder error (those reach their callers): the thread cannot go
            # on. No caller is left waiting: the batch in hand and every queued query
            # fail, and later ones are refused.
            with self._wake:
                self._closed = True
                stranded = [*batch, *self._pending]
                self._pending.clear()
            for item in stranded:
                if not item.future.done():
                    item.future.set_exception(EncoderError("the query encoder stopped"))
            raise

    def _serve(self, batch: list[_Pending]) -> None:
        while True:
            batch.clear()
            batch.extend(self._next_batch() or [])
            if not batch:
                return
            outcomes = self._encode(batch)
            # Idle from now: before the callers hear back, so that a caller's next query
            # (sent as soon as it has its answer) is seen as one that found the thread
            # idle, and waits for company like any other.
            with self._wake:
                self._idle_since = time.monotonic()
            for future, outcome in outcomes:
                if isinstance(outcome, Exception):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)

    def _next_batch(self) -> list[_Pending] | None:
        """The next batch: waits for a first query; if it found the thread idle, up to
        the window (from its arrival) for more; at most ``max_batch``. ``None``: closed
        and nothing queued."""
        with self._wake:
            while not self._pending:
                if self._closed:
                    return None
                self._wake.wait()
            if self._window_s > 0 and self._pending[0].arrived >= self._idle_since:
                deadline = self._pending[0].arrived + self._window_s
                while len(self._pending) < self._max_batch and not self._closed:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._wake.wait(remaining)
            count = min(len(self._pending), self._max_batch)
            return [self._pending.popleft() for _ in range(count)]

    def _encode(self, batch: list[_Pending]) -> list[tuple[Future[Embedding], _Outcome]]:
        """Each live caller's embedding or error (delivered by the caller of this)."""
        # A caller that gave up (its future cancelled) is not encoded for.
        live = [item for item in batch if item.future.set_running_or_notify_cancel()]
        stats = self.stats
        if live:
            stats.largest = max(stats.largest, len(live))
            if len(stats.sizes) < _MAX_SIZES:
                stats.sizes.append(len(live))
        groups: dict[tuple[bool, bool], list[_Pending]] = {}
        for item in live:
            groups.setdefault((item.dense, item.sparse), []).append(item)
        outcomes: list[tuple[Future[Embedding], _Outcome]] = []
        for (dense, sparse), items in groups.items():
            outcomes.extend(self._encode_group(items, dense=dense, sparse=sparse))
        return outcomes

    def _encode_group(
        self, items: Sequence[_Pending], *, dense: bool, sparse: bool
    ) -> list[tuple[Future[Embedding], _Outcome]]:
        # The same text twice in one batch (two clients, one query) is encoded once.
        texts = list(dict.fromkeys(item.text for item in items))
        self.stats.calls += 1
        self.stats.queries += len(items)
        try:
            embeddings = self._embedder.embed_queries(texts, dense=dense, sparse=sparse)
            if len(embeddings) != len(texts):
                msg = f"the encoder returned {len(embeddings)} embeddings for {len(texts)} queries"
                raise EncoderError(msg)
        except Exception as exc:  # every caller of the batch gets the error
            return [(item.future, exc) for item in items]
        by_text = dict(zip(texts, embeddings, strict=True))
        return [(item.future, by_text[item.text]) for item in items]
