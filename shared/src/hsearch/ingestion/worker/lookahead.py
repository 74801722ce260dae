"""Which batch of a job is read and decided when, while its groups are encoded and
written (:meth:`hsearch.ingestion.worker.pipeline.WritePipeline.index_batches`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

from hsearch.db.engine import Session
from hsearch.db.models import IngestionJob
from hsearch.ingestion.worker.decisions import BatchRead, Decision, PreparedItem, groups

__all__ = ["Decide", "Lookahead"]

Decide = Callable[[list[int], BatchRead, "tuple[Session, IngestionJob] | None"], Decision]
"""Decides the items of a batch as ``read`` had them: in a transaction of its own
(``None``) or in a session whose write transaction holds the job locked."""


class Lookahead:
    """Which batch of a job is read and decided when, and the groups decided and not yet
    queued for encoding.

    The store is the bound of the write path, so batches are decided while a group's
    chunks are being stored, in that group's transaction (:meth:`during_write`: on
    SQLite the decision needs the write lock that transaction holds), as long as fewer
    than ``depth`` groups wait decided, and only once a batch's items were read and
    chunked: that happens in a thread of its own, with no lock held, up to ``depth`` + 1
    batches ahead. A decision made in a write counts only
    once its transaction commits (:meth:`settle`); rolled back, its batch is decided
    again. It leaves unchanged documents to a decision of their own, made between two
    writes, since skipping one changes the document's row, and a write holds other rows
    already (two workers would lock the same rows in opposite orders). A batch is decided
    on its own also when no write is under way to hold it (a job's first batch, after
    groups that wrote nothing, or when its read was not done in time).
    """

    def __init__(
        self,
        batches: list[list[int]],
        *,
        read: Callable[[list[int]], Future[BatchRead]],
        decide: Decide,
        max_chunks: int,
        depth: int = 1,
    ) -> None:
        self._batches = batches
        self._read = read
        self._decide = decide
        self._max_chunks = max_chunks
        self._depth = depth
        self._next = 0  # the next batch to decide
        self._reads: dict[int, Future[BatchRead]] = {}
        self._ready: deque[list[PreparedItem]] = deque()
        self._deferred: list[int] = []
        self._tentative: list[tuple[int, Decision]] = []

    def next_group(self, *, decide: bool = True) -> list[PreparedItem] | None:
        """The next group to encode, deciding items on their own (those a write left,
        then the next batches) until one has a group, unless ``decide`` is false;
        ``None`` once every batch is decided and its groups taken (or, not deciding,
        when no decided group waits)."""
        while decide and not self._ready:
            if self._deferred:
                ids, self._deferred = self._deferred, []
                decision = self._decide(ids, self._read(ids).result(), None)
            elif self._next < len(self._batches):
                index = self._next
                self._next += 1
                read = self._reads.pop(index, None) or self._read(self._batches[index])
                decision = self._decide(self._batches[index], read.result(), None)
                # After the decision, not beside it: the batch's write waits for it.
                self._read_ahead()
            else:
                break
            self._adopt(decision)
        return self._ready.popleft() if self._ready else None

    def during_write(self, session: Session, job: IngestionJob) -> None:
        """While a group's chunks are stored (its rows written in ``session``, which
        holds ``job`` locked): while fewer than ``depth`` decided groups wait, decide
        the next batch in that transaction, provided it has been read; then read
        ahead."""
        waiting = len(self._ready) + sum(
            len(groups(d.todo, max_chunks=self._max_chunks)) for _, d in self._tentative
        )
        while waiting < self._depth and self._next < len(self._batches):
            read = self._reads.get(self._next)
            if read is None or not read.done():
                break
            index = self._next
            self._next += 1
            del self._reads[index]
            decision = self._decide(self._batches[index], read.result(), (session, job))
            self._tentative.append((index, decision))
            waiting += len(groups(decision.todo, max_chunks=self._max_chunks))
        self._read_ahead()

    def settle(self, *, committed: bool) -> None:
        """The write's transaction committed, or rolled back: the batches decided in it
        are decided (their groups wait to be encoded), or are to be decided again."""
        if not self._tentative:
            return
        tentative, self._tentative = self._tentative, []
        if committed:
            for _, decision in tentative:
                self._adopt(decision)
        else:
            self._next = tentative[0][0]

    def _adopt(self, decision: Decision) -> None:
        self._ready.extend(groups(decision.todo, max_chunks=self._max_chunks))
        self._deferred.extend(decision.deferred)

    def _read_ahead(self) -> None:
        """Start reading the batches not decided yet, up to ``depth`` + 1 of them, if not
        started."""
        for index in range(self._next, min(self._next + self._depth + 1, len(self._batches))):
            if index not in self._reads:
                self._reads[index] = self._read(self._batches[index])
