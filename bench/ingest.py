"""Ingest throughput: the indexing pipeline against the two things it cannot beat, raw
vector-store inserts and the encoder alone, measured in one run.

Two comparisons, on the first ``--documents`` documents of a BEIR corpus
(:mod:`bench.datasets`; the first ``--end-to-end-documents`` of them for the second,
whose encoder is slow), each submitted as one job (:class:`JobService`, in a committed
unit of work) and indexed by :meth:`IndexingService.process_job`, the code the Celery
worker runs (the broker hop is left out, as in :mod:`bench.runner`):

* **write path**: the pipeline fed by a pass-through encoder
  (:class:`PassThroughEmbedder`: vectors made before the run, looked up by text), against
  raw pymilvus ``insert`` calls of the very rows the pipeline writes, in the same batch
  sizes, into a collection made by the product's store (same schema and indexes). Time
  until the last row is written; the flush that follows on both sides seals the same
  rows, so it is timed apart and left out of the ratio (with it the ratio only gets
  closer to 1). Target: the pipeline at 0.8 times the raw rate or better. The store
  sends its upserts as columns, which costs pymilvus less than rows: a second raw side
  inserts the same rows as columns, and ``ratio_columns`` compares the pipeline with it;
* **end to end**: the pipeline with the real encoder (the offline one by default), until
  the job is reported finished (flush included: the encoder alone has none), against the
  same encoder alone encoding the same texts in the same batches. Target: 0.9 or better.

The pass-through encoder's sparse vectors are the analyzer's term counts of each text
(what the offline encoder returns, ``SparseKind.TERM_FREQUENCY``), so the pipeline
weighs them with the tenant's BM25 statistics as it does for the offline encoder: that
work is the pipeline's, and counted. ``--sparse-kind learned`` leaves it out (vectors
stored as they are, as for BGE-M3). Dense vectors are unit vectors drawn from a hash of
the text.

Each side runs on fresh state: a copy of one migrated SQLite database and a new
collection (dropped afterwards). A first, untimed pass through the pipeline makes the
pass-through vectors, records the batches the pipeline encodes and the rows it writes
(the raw side inserts those), and warms everything up. Then the sides alternate, repeat
``--repeats`` times (``--end-to-end-repeats`` for the second comparison, whose runs are
shorter and whose encoder's speed moves most with other work on the machine), and each
ratio is the median of the per-repeat ratios (a repeat's sides run back to back, under
the same load), with its spread.

No batch is encoded twice: every pipeline run must encode exactly its chunks, in the
batches of the first pass; the run stops otherwise (:class:`EncodedTwiceError`).

Usage (from the repository root)::

    python -m bench.ingest                     # a summary
    python -m bench.ingest --json              # one JSON object on stdout
    python -m bench.ingest --documents 5000 --end-to-end-documents 1000 --repeats 3 \
        --end-to-end-repeats 5
    python -m bench.ingest --store memory --parts write   # the pipeline's own work alone

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from pydantic import SecretStr
from pymilvus import MilvusClient
from sqlalchemy import create_engine, make_url, text

from bench.datasets import DATASETS_ROOT, load_dataset
from bench.interrupt import INTERRUPTED, progress, unwind_on_signals
from bench.runner import MILVUS_STOP_SECONDS, Options, build_settings
from hsearch.config import EncoderKind, Settings
from hsearch.db.migrate import upgrade_database
from hsearch.db.models import JobStatus
from hsearch.embedding.factory import create_embedder
from hsearch.embedding.fake import AnalyzerTokenizer
from hsearch.embedding.protocol import Embedder, Embedding, EncoderInfo, SparseKind, Tokenizer
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.lexical.analyzer import term_frequencies
from hsearch.local.processes import Child, start_milvus_lite
from hsearch.runtime import build_services, keep_startup_heap
from hsearch.types import SparseVector
from hsearch.vectorstore.factory import create_vector_store
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.milvus import MilvusVectorStore, grpc_options

# The rows and columns of MilvusVectorStore's records, built by its own functions, so
# that the raw side writes exactly what the pipeline does.
from hsearch.vectorstore.milvus import _entities as milvus_entities
from hsearch.vectorstore.milvus import _to_columns as milvus_columns
from hsearch.vectorstore.milvus import _to_row as milvus_row
from hsearch.vectorstore.protocol import ChunkRecord, VectorStore

TENANT = "bench"
DEFAULT_DATASET = DATASETS_ROOT / "en-dbpedia-entity-5k"
WRITE_TARGET = 0.8
END_TO_END_TARGET = 0.9
DEFAULT_DOCUMENTS = 2000
PASS_THROUGH_DIMENSION = 384  # the offline encoder's (all-MiniLM-L6-v2)


class EncodedTwiceError(RuntimeError):
    """A pipeline run encoded more (or other) texts than its chunks, once each, in the
    batches of the first pass."""


# -- encoders -----------------------------------------------------------------------------


def made_vector(text: str, *, lang: str, dimension: int) -> Embedding:
    """A text's pass-through vectors: a unit vector drawn from a hash of the text, and the
    analyzer's term counts (the offline encoder's sparse side; the same values serve as
    final weights for ``SparseKind.LEARNED``)."""
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
    dense = np.random.default_rng(seed).normal(size=dimension)
    dense /= np.linalg.norm(dense)
    sparse = term_frequencies(text, lang=lang)[0]
    return Embedding(dense=tuple(float(v) for v in dense), sparse=sparse)


class PassThroughEmbedder:
    """An :class:`Embedder` that returns vectors made before the run, looked up by text.

    While ``filling`` (the first pass) it makes the vectors of texts it has not seen
    (:func:`made_vector`); afterwards an unknown text is an error, so a timed run never
    computes a vector.
    """

    def __init__(self, info: EncoderInfo) -> None:
        self._info = info
        self._vectors: dict[str, Embedding] = {}
        self.filling = True
        # Chunks are cut by the analyzer's words, as the fake encoder counts them: the
        # vectors are made for whatever chunks the pipeline makes.
        self._tokenizer = AnalyzerTokenizer(512)

    @property
    def info(self) -> EncoderInfo:
        return self._info

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        if self.filling:
            for i, text in enumerate(texts):
                if text not in self._vectors:
                    self._vectors[text] = made_vector(
                        text,
                        lang=langs[i] if langs else "",
                        dimension=self._info.dimension,
                    )
        try:
            return [self._vectors[text] for text in texts]
        except KeyError as exc:
            msg = f"pass-through encoder: no vector made for {str(exc)[:80]}"
            raise RuntimeError(msg) from None

    def embed_query(self, text: str, *, dense: bool = True, sparse: bool = True) -> Embedding:
        return self.embed_documents([text])[0]

    def embed_queries(
        self, texts: Sequence[str], *, dense: bool = True, sparse: bool = True
    ) -> list[Embedding]:
        return self.embed_documents(texts)

    def embed_query_without_model(self, text: str) -> SparseVector | None:
        """``None``: the vectors made here stand for a model's (searches never use it)."""
        del text
        return None


class CountingEmbedder:
    """Wraps an encoder: counts its document calls and texts, times them and, with
    ``record``, keeps each call's texts and languages (the batches to replay)."""

    def __init__(self, inner: Embedder, *, record: bool = False) -> None:
        self._inner = inner
        self._record = record
        self.batch_sizes: list[int] = []
        self.batches: list[tuple[list[str], list[str] | None]] = []
        self.seconds = 0.0

    @property
    def info(self) -> EncoderInfo:
        return self._inner.info

    @property
    def tokenizer(self) -> Tokenizer:
        return self._inner.tokenizer

    @property
    def texts(self) -> int:
        return sum(self.batch_sizes)

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        started = time.perf_counter()
        out = self._inner.embed_documents(texts, langs=langs)
        self.seconds += time.perf_counter() - started
        self.batch_sizes.append(len(texts))
        if self._record:
            self.batches.append((list(texts), None if langs is None else list(langs)))
        return out

    def embed_query(self, text: str, *, dense: bool = True, sparse: bool = True) -> Embedding:
        return self._inner.embed_query(text, dense=dense, sparse=sparse)

    def embed_queries(
        self, texts: Sequence[str], *, dense: bool = True, sparse: bool = True
    ) -> list[Embedding]:
        return self._inner.embed_queries(texts, dense=dense, sparse=sparse)

    def embed_query_without_model(self, text: str) -> SparseVector | None:
        return self._inner.embed_query_without_model(text)

    def counts(self) -> dict[str, int]:
        return {"calls": len(self.batch_sizes), "texts": self.texts}


def check_encoded_once(counter: CountingEmbedder, *, chunks: int, batches: Sequence[int]) -> None:
    """Raise :class:`EncodedTwiceError` unless ``counter`` saw exactly ``chunks`` texts in
    the batch sizes ``batches`` (those of the first pass)."""
    if counter.texts != chunks or counter.batch_sizes != list(batches):
        msg = (
            f"the pipeline encoded {counter.texts} texts in {len(counter.batch_sizes)} calls "
            f"for {chunks} chunks; expected each chunk once, in the {len(batches)} batches "
            f"of the first pass ({sum(batches)} texts)"
        )
        raise EncodedTwiceError(msg)


# -- stores ---------------------------------------------------------------------------------


class MeteredStore:
    """A vector store that times the pipeline's upserts and flushes (and, with ``keep``,
    keeps what it upserts); every other call goes to ``inner`` as it is.

    The pipeline sends a group's upsert and waits for its answer on another thread
    (:meth:`VectorStore.send_upsert`), so two may be in flight at once: the time of the
    upserts is the time at least one was, from its send to its answer. Their CPU time is
    the sending thread's (the client's conversion and send)."""

    def __init__(self, inner: VectorStore, *, keep: bool = False) -> None:
        self.inner = inner
        self._keep = keep
        self.upserts: list[list[ChunkRecord]] = []
        self.upsert_sizes: list[int] = []
        self.upsert_cpu_seconds = 0.0  # of the sending thread: the client's own work
        self.flush_seconds = 0.0
        self._spans: list[tuple[float, float]] = []
        self._lock = threading.Lock()

    @property
    def upsert_seconds(self) -> float:
        """The time at least one upsert was in flight."""
        total, reached = 0.0, float("-inf")
        for start, end in sorted(self._spans):
            if end > reached:
                total += end - max(start, reached)
                reached = end
        return total

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        self.send_upsert(records)()

    def send_upsert(self, records: Sequence[ChunkRecord]) -> Callable[[], None]:
        started, cpu = time.perf_counter(), time.thread_time()
        answer = self.inner.send_upsert(records)
        self.upsert_cpu_seconds += time.thread_time() - cpu
        self.upsert_sizes.append(len(records))
        if self._keep:
            self.upserts.append(list(records))

        def answered() -> None:
            answer()
            with self._lock:
                self._spans.append((started, time.perf_counter()))

        return answered

    def flush(self) -> None:
        started = time.perf_counter()
        self.inner.flush()
        self.flush_seconds += time.perf_counter() - started

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Target(Protocol):
    """Where both sides write: a store per run, and the raw side's own calls."""

    description: str

    def store(self, settings: Settings) -> VectorStore: ...

    def raw_rows(self, records: Sequence[ChunkRecord]) -> Any:
        """``records`` as the raw side sends them (made before the clock starts)."""
        ...

    def raw_insert(self, store: VectorStore, rows: Any) -> None: ...

    def raw_columns(self, records: Sequence[ChunkRecord]) -> Any:
        """``records`` as the raw side sends them as columns (made before the clock)."""
        ...

    def raw_insert_columns(self, store: VectorStore, batches: Sequence[Any]) -> None:
        """Insert every batch of :meth:`raw_columns`, as columns."""
        ...

    def raw_flush(self, store: VectorStore) -> None: ...

    def drop(self, store: VectorStore) -> None: ...

    def close(self) -> None: ...


class MilvusTarget:
    """A Milvus server: the product's store for the pipeline, pymilvus for the raw side."""

    def __init__(self, uri: str, *, description: str = "Milvus") -> None:
        self._uri = uri
        self._client = MilvusClient(uri=uri, grpc_options=grpc_options())
        self.description = description

    def store(self, settings: Settings) -> MilvusVectorStore:
        return create_vector_store(settings.milvus, uri=self._uri)

    def raw_rows(self, records: Sequence[ChunkRecord]) -> list[dict[str, Any]]:
        return [milvus_row(r) for r in records]

    def raw_insert(self, store: VectorStore, rows: Any) -> None:
        assert isinstance(store, MilvusVectorStore)
        self._client.insert(store.collection, rows)

    def raw_columns(self, records: Sequence[ChunkRecord]) -> dict[str, list[Any]]:
        return milvus_columns(records)

    def raw_insert_columns(self, store: VectorStore, batches: Sequence[Any]) -> None:
        """pymilvus' connection inserting columns, as ``Collection.insert`` does for
        column data and the store's upserts do (the fields read once, as there)."""
        assert isinstance(store, MilvusVectorStore)
        schema = self._client.describe_collection(store.collection)
        connection = self._client._get_connection()
        for columns in batches:
            connection.batch_insert(
                store.collection, milvus_entities(schema, columns), schema=schema
            )

    def raw_flush(self, store: VectorStore) -> None:
        assert isinstance(store, MilvusVectorStore)
        self._client.flush(store.collection)

    def drop(self, store: VectorStore) -> None:
        assert isinstance(store, MilvusVectorStore)
        store.drop_collection()

    def close(self) -> None:
        self._client.close()


class InMemoryTarget:
    """The in-memory store on both sides: a plumbing check (tests), meaningless rates."""

    description = "in-memory store"

    def store(self, settings: Settings) -> InMemoryVectorStore:
        return InMemoryVectorStore(name=settings.milvus.collection)

    def raw_rows(self, records: Sequence[ChunkRecord]) -> list[ChunkRecord]:
        return list(records)

    def raw_insert(self, store: VectorStore, rows: Any) -> None:
        store.upsert(rows)

    def raw_columns(self, records: Sequence[ChunkRecord]) -> list[ChunkRecord]:
        return list(records)

    def raw_insert_columns(self, store: VectorStore, batches: Sequence[Any]) -> None:
        for records in batches:
            store.upsert(records)

    def raw_flush(self, store: VectorStore) -> None:
        store.flush()

    def drop(self, store: VectorStore) -> None:
        pass

    def close(self) -> None:
        pass


# -- one run of a side --------------------------------------------------------------------


class Databases(Protocol):
    """Where each run's metadata database comes from: a fresh, migrated one per run."""

    kind: str

    def fresh(self, data_dir: Path) -> str:
        """The URL of a new migrated database (``data_dir`` is the run's own directory)."""
        ...

    def close(self) -> None: ...


class SQLiteDatabases:
    """A copy of one migrated SQLite file per run, in the run's directory (the embedded
    profile's metadata store)."""

    kind = "sqlite"

    def __init__(self, root: Path) -> None:
        self._template = root / "template.sqlite"
        upgrade_database(f"sqlite:///{self._template.resolve()}")

    def fresh(self, data_dir: Path) -> str:
        target = data_dir / "hsearch.sqlite"
        shutil.copyfile(self._template, target)
        return f"sqlite:///{target.resolve()}"

    def close(self) -> None:
        return None


class PostgresDatabases:
    """A database of its own per run on the Postgres server of ``url`` (the production
    profile's metadata store), created from a migrated template (``CREATE DATABASE ...
    TEMPLATE``: untimed, like the SQLite copy); all dropped at the end. The user of
    ``url`` must be allowed to create databases."""

    kind = "postgresql"

    def __init__(self, url: str) -> None:
        self._url = make_url(url)
        self._admin = create_engine(self._url, isolation_level="AUTOCOMMIT")
        self._prefix = f"hsearch_bench_{uuid.uuid4().hex[:8]}"
        self._names: list[str] = []
        try:
            self._template = self._create(f"{self._prefix}_template")
            upgrade_database(self._render(self._template))
        except BaseException:
            self.close()  # the template, if it was made
            raise

    def fresh(self, data_dir: Path) -> str:
        return self._render(self._create(f"{self._prefix}_{len(self._names)}", self._template))

    def close(self) -> None:
        try:
            with self._admin.connect() as conn:
                for name in reversed(self._names):
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        finally:
            self._admin.dispose()

    def _create(self, name: str, template: str | None = None) -> str:
        clause = f' TEMPLATE "{template}"' if template else ""
        with self._admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"{clause}'))
        self._names.append(name)
        return name

    def _render(self, name: str) -> str:
        return self._url.set(database=name).render_as_string(hide_password=False)


@dataclass
class Stack:
    """What every run shares: where its database comes from, and the target."""

    root: Path
    databases: Databases
    target: Target
    runs: int = 0

    def settings(self) -> Settings:
        """Settings of a fresh run: a fresh migrated database, a directory of its own,
        a new collection name (bench.runner's settings: jobs run whole)."""
        self.runs += 1
        data_dir = self.root / f"run-{self.runs}"
        data_dir.mkdir()
        settings = build_settings(data_dir, "", Options())
        url = self.databases.fresh(data_dir)
        return settings.model_copy(
            update={"database": settings.database.model_copy(update={"url": SecretStr(url)})}
        )


@dataclass
class PipelineRun:
    chunks: int
    seconds: float  # process_job, until the job is reported finished
    flush_seconds: float
    upsert_seconds: float
    upsert_cpu_seconds: float  # the store-write thread's CPU in the upserts
    indexing_cpu_seconds: float  # the indexing thread's CPU (process_job's caller)
    encode_seconds: float
    submit_seconds: float
    upsert_sizes: list[int]
    counter: CountingEmbedder
    kept: list[list[ChunkRecord]] = field(default_factory=list)

    @property
    def write_seconds(self) -> float:
        return self.seconds - self.flush_seconds

    def row(self) -> dict[str, Any]:
        return {
            "chunks": self.chunks,
            "seconds": round(self.seconds, 4),
            "write_seconds": round(self.write_seconds, 4),
            "flush_seconds": round(self.flush_seconds, 4),
            "upsert_seconds": round(self.upsert_seconds, 4),
            "upsert_cpu_seconds": round(self.upsert_cpu_seconds, 4),
            "indexing_cpu_seconds": round(self.indexing_cpu_seconds, 4),
            "encode_seconds": round(self.encode_seconds, 4),
            "submit_seconds": round(self.submit_seconds, 4),
            "encode": self.counter.counts(),
        }


def run_pipeline(
    stack: Stack,
    embedder: Embedder,
    documents: Sequence[DocumentInput],
    *,
    keep: bool = False,
) -> PipelineRun:
    """Submit ``documents`` as one job (not timed: the API's part), then index it with
    :meth:`IndexingService.process_job` on fresh state (timed), as a worker does;
    ``keep`` keeps the records the store was given."""
    settings = stack.settings()
    counter = CountingEmbedder(embedder, record=keep)
    store = MeteredStore(stack.target.store(settings), keep=keep)
    queue = InMemoryJobQueue()
    services = build_services(settings, embedder=counter, store=store, queue=queue)
    keep_startup_heap()  # as the worker does once built (what the run made before, too)
    try:
        started = time.perf_counter()
        with unit_of_work(services.sessions, queue=queue) as uow:
            job = JobService(uow, settings=settings.ingest).submit(
                tenant_id=TENANT, documents=documents
            )
        submitted, cpu = time.perf_counter(), time.thread_time()
        status = services.indexing().process_job(job.id)
        seconds = time.perf_counter() - submitted
        indexing_cpu = time.thread_time() - cpu
        if status is not JobStatus.SUCCEEDED:
            msg = f"the pipeline's job ended {status}, not succeeded"
            raise RuntimeError(msg)
        chunks = store.count(tenant_id=TENANT)
        if chunks != sum(store.upsert_sizes):
            msg = f"the store holds {chunks} chunks; the pipeline wrote {sum(store.upsert_sizes)}"
            raise RuntimeError(msg)
        return PipelineRun(
            chunks=chunks,
            seconds=seconds,
            flush_seconds=store.flush_seconds,
            upsert_seconds=store.upsert_seconds,
            upsert_cpu_seconds=store.upsert_cpu_seconds,
            indexing_cpu_seconds=indexing_cpu,
            encode_seconds=counter.seconds,
            submit_seconds=submitted - started,
            upsert_sizes=store.upsert_sizes,
            counter=counter,
            kept=store.upserts,
        )
    finally:
        stack.target.drop(store.inner)
        services.close()


def run_raw(
    stack: Stack, info: EncoderInfo, batches: Sequence[Any], rows: int, *, columns: bool = False
) -> dict[str, Any]:
    """Insert ``batches`` (rows the pipeline wrote, in its batch sizes; with ``columns``
    the same as columns) into a new collection of the product's schema with the raw
    client; then flush (timed apart)."""
    settings = stack.settings()
    store = stack.target.store(settings)
    try:
        store.ensure_collection(info)
        keep_startup_heap()  # as before a pipeline run
        started, cpu = time.perf_counter(), time.thread_time()
        if columns:
            stack.target.raw_insert_columns(store, batches)
        else:
            for batch in batches:
                stack.target.raw_insert(store, batch)
        written, client_cpu = time.perf_counter(), time.thread_time() - cpu
        stack.target.raw_flush(store)
        flushed = time.perf_counter()
        count = store.count(tenant_id=TENANT)
        if count != rows:
            msg = f"the raw side's collection holds {count} rows; {rows} were inserted"
            raise RuntimeError(msg)
        return {
            "rows": rows,
            "write_seconds": written - started,
            "client_cpu_seconds": client_cpu,
            "flush_seconds": flushed - written,
        }
    finally:
        stack.target.drop(store)
        store.close()


def run_encoder(
    embedder: Embedder, batches: Sequence[tuple[list[str], list[str] | None]]
) -> dict[str, Any]:
    """The encoder alone on the texts the pipeline encodes, in its batches."""
    counter = CountingEmbedder(embedder)
    started = time.perf_counter()
    for texts, langs in batches:
        counter.embed_documents(texts, langs=langs)
    seconds = time.perf_counter() - started
    return {"rows": counter.texts, "seconds": seconds, "encode": counter.counts()}


# -- the benchmark --------------------------------------------------------------------------


@dataclass
class Config:
    end_to_end_documents: int = 300
    repeats: int = 5
    end_to_end_repeats: int = 7
    sparse_kind: SparseKind = SparseKind.TERM_FREQUENCY
    dimension: int = PASS_THROUGH_DIMENSION
    parts: tuple[str, ...] = ("write", "end_to_end")


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, minimum and maximum, rounded for reading."""
    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def rounded(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its seconds rounded for reading."""
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}


def alternate(repeat: int, sides: Sequence[str]) -> list[str]:
    """The order of the sides in ``repeat``: as given, then reversed, and so on."""
    return list(sides) if repeat % 2 == 0 else list(reversed(sides))


def first_pass(
    stack: Stack, documents: Sequence[DocumentInput], config: Config
) -> tuple[PipelineRun, PassThroughEmbedder]:
    """``documents`` through the pipeline once, untimed, with a pass-through encoder
    that makes the vectors as it goes: the vectors, the batches the pipeline encodes and
    the rows it writes, for the timed runs; and everything warmed up."""
    info = EncoderInfo(
        name="pass-through",
        dimension=config.dimension,
        version="1",
        sparse_kind=config.sparse_kind,
    )
    passthrough = PassThroughEmbedder(info)
    progress(f"first pass (untimed): {len(documents)} documents through the pipeline")
    first = run_pipeline(stack, passthrough, documents, keep=True)
    passthrough.filling = False
    check_encoded_once(first.counter, chunks=first.chunks, batches=first.counter.batch_sizes)
    progress(
        f"  {first.chunks} chunks in {len(first.counter.batch_sizes)} encoder calls and "
        f"{len(first.upsert_sizes)} upserts; {first.seconds:.1f} s"
    )
    return first, passthrough


def measure_write(
    stack: Stack, documents: Sequence[DocumentInput], config: Config
) -> dict[str, Any]:
    """Raw inserts against the pipeline fed by the pass-through encoder, alternating."""
    first, passthrough = first_pass(stack, documents, config)
    batches = first.counter.batch_sizes
    rows = [stack.target.raw_rows(records) for records in first.kept]
    columns = [stack.target.raw_columns(records) for records in first.kept]
    raw_runs: list[dict[str, Any]] = []
    column_runs: list[dict[str, Any]] = []
    pipe_runs: list[PipelineRun] = []
    for repeat in range(config.repeats):
        for side in alternate(repeat, ("raw_insert", "raw_columns", "pipeline")):
            if side == "raw_insert":
                raw_runs.append(run_raw(stack, passthrough.info, rows, first.chunks))
            elif side == "raw_columns":
                column_runs.append(
                    run_raw(stack, passthrough.info, columns, first.chunks, columns=True)
                )
            else:
                run = run_pipeline(stack, passthrough, documents)
                check_encoded_once(run.counter, chunks=first.chunks, batches=batches)
                pipe_runs.append(run)
        progress(
            f"  write, repeat {repeat + 1}/{config.repeats}: raw "
            f"{first.chunks / raw_runs[-1]['write_seconds']:.0f} rows/s, as columns "
            f"{first.chunks / column_runs[-1]['write_seconds']:.0f} rows/s, pipeline "
            f"{first.chunks / pipe_runs[-1].write_seconds:.0f} rows/s"
        )
    return {
        "documents": len(documents),
        "chunks": first.chunks,
        "encode_calls": len(batches),
        "upserts": len(first.upsert_sizes),
        **write_summary(raw_runs, pipe_runs, first.chunks, columns=column_runs),
    }


def measure_end_to_end(
    stack: Stack, documents: Sequence[DocumentInput], config: Config, model: Embedder
) -> dict[str, Any]:
    """The encoder alone against the pipeline with it, alternating."""
    first, _ = first_pass(stack, documents, config)
    batches = first.counter.batch_sizes
    replay = first.counter.batches
    run_encoder(model, replay[:2])  # warm-up, untimed
    alone: list[dict[str, Any]] = []
    piped: list[PipelineRun] = []
    for repeat in range(config.end_to_end_repeats):
        for side in alternate(repeat, ("encoder", "pipeline")):
            if side == "encoder":
                alone.append(run_encoder(model, replay))
            else:
                run = run_pipeline(stack, model, documents)
                check_encoded_once(run.counter, chunks=first.chunks, batches=batches)
                piped.append(run)
        progress(
            f"  end to end, repeat {repeat + 1}/{config.end_to_end_repeats}: encoder alone "
            f"{first.chunks / alone[-1]['seconds']:.1f} rows/s, pipeline "
            f"{first.chunks / piped[-1].seconds:.1f} rows/s"
        )
    return {
        "documents": len(documents),
        "chunks": first.chunks,
        "encode_calls": len(batches),
        **end_to_end_summary(alone, piped, first.chunks, model.info),
    }


def write_summary(
    raw: Sequence[dict[str, Any]],
    pipeline: Sequence[PipelineRun],
    chunks: int,
    *,
    columns: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """The write-path comparison: the pipeline against raw inserts of rows
    (``MilvusClient.insert``, the baseline of the target) and of the same rows as
    columns (``columns``: the path the store's upserts take)."""
    raw_rates = [chunks / r["write_seconds"] for r in raw]
    column_rates = [chunks / r["write_seconds"] for r in columns]
    pipe_rates = [chunks / p.write_seconds for p in pipeline]
    ratios = [p / r for p, r in zip(pipe_rates, raw_rates, strict=True)]
    column_ratios = [p / r for p, r in zip(pipe_rates, column_rates, strict=True)]
    with_flush = [
        (chunks / p.seconds) / (chunks / (r["write_seconds"] + r["flush_seconds"]))
        for p, r in zip(pipeline, raw, strict=True)
    ]
    ratio = statistics.median(ratios)
    # Per chunk, where the pipeline's write time goes (medians over the repeats).
    ms = 1000 / chunks
    store_ms = statistics.median(p.upsert_seconds for p in pipeline) * ms
    encode_ms = statistics.median(p.encode_seconds for p in pipeline) * ms
    write_ms = statistics.median(p.write_seconds for p in pipeline) * ms
    return {
        "raw_insert": {"rows_per_s": spread(raw_rates), "runs": [rounded(r) for r in raw]},
        "raw_insert_columns": {
            "rows_per_s": spread(column_rates),
            "runs": [rounded(r) for r in columns],
        },
        "pipeline": {"rows_per_s": spread(pipe_rates), "runs": [p.row() for p in pipeline]},
        "ratio": {**spread(ratios), "per_repeat": [round(r, 4) for r in ratios]},
        "ratio_with_flush": spread(with_flush),
        "target": WRITE_TARGET,
        "pass": ratio >= WRITE_TARGET,
        # Against raw inserts that send columns, as the store does: its client work
        # is then no cheaper than the raw side's.
        "ratio_columns": {
            **spread(column_ratios),
            "per_repeat": [round(r, 4) for r in column_ratios],
        },
        "pass_columns": statistics.median(column_ratios) >= WRITE_TARGET,
        "ms_per_chunk": {
            "raw_insert": round(statistics.median(r["write_seconds"] for r in raw) * ms, 4),
            "raw_insert_columns": round(
                statistics.median(r["write_seconds"] for r in columns) * ms, 4
            ),
            "pipeline": round(write_ms, 4),
            "pipeline_store_upsert": round(store_ms, 4),
            "pipeline_encode": round(encode_ms, 4),
            "pipeline_other": round(write_ms - store_ms - encode_ms, 4),
        },
        # CPU time per chunk of the threads doing the Python work (one interpreter lock on
        # the pipeline's side, though SQLite and gRPC run part of it outside): the raw
        # side's client (pymilvus turning rows into its requests); the pipeline's
        # indexing thread (SQL, chunking, BM25, its records; the job's flush, mostly a
        # wait, included) and store-write thread (pymilvus' requests as on the raw side,
        # plus the store's conversion of records to rows). The encode thread (here
        # lookups of ready vectors) is not counted.
        "cpu_ms_per_chunk": {
            "raw_insert_client": round(
                statistics.median(r["client_cpu_seconds"] for r in raw) * ms, 4
            ),
            "raw_insert_columns_client": round(
                statistics.median(r["client_cpu_seconds"] for r in columns) * ms, 4
            ),
            "pipeline_indexing_thread": round(
                statistics.median(p.indexing_cpu_seconds for p in pipeline) * ms, 4
            ),
            "pipeline_store_client": round(
                statistics.median(p.upsert_cpu_seconds for p in pipeline) * ms, 4
            ),
        },
    }


def end_to_end_summary(
    alone: Sequence[dict[str, Any]],
    pipeline: Sequence[PipelineRun],
    chunks: int,
    info: EncoderInfo,
) -> dict[str, Any]:
    alone_rates = [chunks / a["seconds"] for a in alone]
    pipe_rates = [chunks / p.seconds for p in pipeline]
    ratios = [p / a for p, a in zip(pipe_rates, alone_rates, strict=True)]
    ratio = statistics.median(ratios)
    # Within each pipeline run: the encoder's share of its time, the ratio it would
    # reach if the encoder ran as fast there as alone. Both are measured in the same
    # run, so load on the machine moves them together (the encoder alone runs beside).
    shares = [p.encode_seconds / p.seconds for p in pipeline]
    ms = 1000 / chunks
    return {
        "encoder": info.fingerprint,
        "encoder_alone": {"rows_per_s": spread(alone_rates), "runs": [rounded(a) for a in alone]},
        "pipeline": {"rows_per_s": spread(pipe_rates), "runs": [p.row() for p in pipeline]},
        "ratio": {**spread(ratios), "per_repeat": [round(r, 4) for r in ratios]},
        "target": END_TO_END_TARGET,
        "pass": ratio >= END_TO_END_TARGET,
        "encoder_share": {**spread(shares), "per_repeat": [round(r, 4) for r in shares]},
        "ms_per_chunk": {
            "encoder_alone": round(statistics.median(a["seconds"] for a in alone) * ms, 4),
            "pipeline": round(statistics.median(p.seconds for p in pipeline) * ms, 4),
            "pipeline_encode": round(statistics.median(p.encode_seconds for p in pipeline) * ms, 4),
            "pipeline_store_upsert": round(
                statistics.median(p.upsert_seconds for p in pipeline) * ms, 4
            ),
            "pipeline_flush": round(statistics.median(p.flush_seconds for p in pipeline) * ms, 4),
            "pipeline_other": round(
                statistics.median(p.seconds - p.encode_seconds for p in pipeline) * ms, 4
            ),
        },
    }


def run(
    documents: Sequence[DocumentInput],
    config: Config,
    *,
    root: Path,
    target: Target,
    encoder: Callable[[], Embedder] | None,
    dataset: str,
    database_url: str | None = None,
) -> dict[str, Any]:
    """The whole benchmark in ``root`` (a directory it may fill) on ``target``, with
    SQLite metadata, or Postgres on the server of ``database_url``; returns the result
    object (what ``--json`` prints)."""
    started = time.perf_counter()
    load_before = os.getloadavg()
    databases = SQLiteDatabases(root) if database_url is None else PostgresDatabases(database_url)
    stack = Stack(root=root, databases=databases, target=target)
    settings = Settings(_env_file=None)  # what every run's settings hold for these knobs
    result: dict[str, Any] = {"benchmark": "ingest", "dataset": dataset}
    try:
        if "write" in config.parts:
            result["write"] = measure_write(stack, documents, config)
        if "end_to_end" in config.parts:
            if encoder is None:
                msg = "the end-to-end part needs an encoder"
                raise ValueError(msg)
            progress("loading the encoder")
            model = encoder()
            subset = documents[: config.end_to_end_documents]
            result["end_to_end"] = measure_end_to_end(stack, subset, config, model)
    finally:
        databases.close()
    ingest = settings.ingest
    return {
        **result,
        "settings": {
            "repeats": config.repeats,
            "end_to_end_repeats": config.end_to_end_repeats,
            "pass_through": {
                "dimension": config.dimension,
                "sparse_kind": config.sparse_kind.value,
            },
            "batch_documents": ingest.batch_documents,
            "batch_chunks": ingest.batch_chunks,
            "chunk_max_tokens": ingest.chunk_max_tokens,
            "chunk_overlap_tokens": ingest.chunk_overlap_tokens,
            "encoder_batch_size": settings.encoder.batch_size,
            "jobs": 1,
            "store": target.description,
            "database": databases.kind,
        },
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_before": [round(v, 2) for v in load_before],
            "load_average_after": [round(v, 2) for v in os.getloadavg()],
        },
        "seconds": round(time.perf_counter() - started, 1),
    }


def summary(result: dict[str, Any]) -> str:
    """The result as a few lines of text."""
    lines = [
        f"{result['dataset']}, {result['settings']['repeats']} and "
        f"{result['settings']['end_to_end_repeats']} repeats, "
        f"{result['settings']['store']}; load average "
        f"{result['machine']['load_average_before'][0]} -> "
        f"{result['machine']['load_average_after'][0]} on {result['machine']['cpus']} CPUs",
    ]

    def size(part: dict[str, Any]) -> str:
        return (
            f"{part['documents']} documents, {part['chunks']} chunks encoded once each in "
            f"{part['encode_calls']} calls per pipeline run"
        )

    def verdict(part: dict[str, Any]) -> str:
        r = part["ratio"]
        mark = "pass" if part["pass"] else "FAIL"
        return (
            f"ratio {r['median']:.3f} (min {r['min']:.3f}, max {r['max']:.3f}), "
            f"target >= {part['target']}: {mark}"
        )

    def rate(side: dict[str, Any]) -> str:
        r = side["rows_per_s"]
        return f"{r['median']:.1f} rows/s ({r['min']:.1f}-{r['max']:.1f})"

    if "write" in result:
        w = result["write"]
        m, c = w["ms_per_chunk"], w["cpu_ms_per_chunk"]
        lines += [
            f"write path ({size(w)}):",
            f"  raw insert {rate(w['raw_insert'])}, as columns "
            f"{rate(w['raw_insert_columns'])}, pipeline {rate(w['pipeline'])}",
            f"  {verdict(w)}; with the flush {w['ratio_with_flush']['median']:.3f}",
            f"  against raw inserts of columns: ratio {w['ratio_columns']['median']:.3f} "
            f"(min {w['ratio_columns']['min']:.3f}, max {w['ratio_columns']['max']:.3f}): "
            f"{'pass' if w['pass_columns'] else 'FAIL'}",
            f"  ms per chunk: raw {m['raw_insert']:.3f}; pipeline {m['pipeline']:.3f} = store "
            f"upsert {m['pipeline_store_upsert']:.3f} + encoder {m['pipeline_encode']:.3f} "
            f"+ the rest {m['pipeline_other']:.3f}",
            f"  CPU ms per chunk: raw side's client {c['raw_insert_client']:.3f} (as columns "
            f"{c['raw_insert_columns_client']:.3f}); pipeline's "
            f"indexing thread {c['pipeline_indexing_thread']:.3f} + store client "
            f"{c['pipeline_store_client']:.3f} (one interpreter lock)",
        ]
    if "end_to_end" in result:
        e = result["end_to_end"]
        m = e["ms_per_chunk"]
        lines += [
            f"end to end ({size(e)}; {e['encoder']}):",
            f"  encoder alone {rate(e['encoder_alone'])}, pipeline {rate(e['pipeline'])}",
            f"  {verdict(e)}",
            f"  the encoder's share of each pipeline run: {e['encoder_share']['median']:.3f} "
            f"(min {e['encoder_share']['min']:.3f}, max {e['encoder_share']['max']:.3f})",
            f"  ms per chunk: encoder alone {m['encoder_alone']:.2f}; pipeline "
            f"{m['pipeline']:.2f} (encoding {m['pipeline_encode']:.2f}, the rest "
            f"{m['pipeline_other']:.2f}: store upsert {m['pipeline_store_upsert']:.2f}, flush "
            f"{m['pipeline_flush']:.2f})",
        ]
    return "\n".join(lines)


def corpus_documents(path: Path, limit: int) -> list[DocumentInput]:
    """The first ``limit`` documents of a BEIR folder's corpus."""
    corpus = load_dataset(path).corpus[:limit]
    return [DocumentInput(external_id=d["_id"], title=d["title"], text=d["text"]) for d in corpus]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.ingest", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--dataset", type=Path, default=DEFAULT_DATASET, help="a BEIR folder (corpus.jsonl)"
    )
    parser.add_argument(
        "--documents", type=int, default=DEFAULT_DOCUMENTS, metavar="N",
        help="the first N documents of the corpus, one job (write path)",
    )  # fmt: skip
    parser.add_argument(
        "--end-to-end-documents", type=int, default=Config.end_to_end_documents, metavar="N",
        help="the first N of those for the end-to-end part (the encoder is slow)",
    )  # fmt: skip
    parser.add_argument(
        "--repeats", type=int, default=Config.repeats, metavar="N",
        help="repeats of the write-path comparison",
    )  # fmt: skip
    parser.add_argument(
        "--end-to-end-repeats", type=int, default=Config.end_to_end_repeats, metavar="N",
        help="repeats of the end-to-end comparison",
    )  # fmt: skip
    parser.add_argument("--parts", default=",".join(Config.parts), help="write, end_to_end or both")
    parser.add_argument(
        "--encoder", choices=("offline", "fake"), default="offline",
        help="the end-to-end encoder (fake: a plumbing check, meaningless rates)",
    )  # fmt: skip
    parser.add_argument(
        "--sparse-kind", choices=[k.value for k in SparseKind],
        default=SparseKind.TERM_FREQUENCY.value,
        help="the pass-through encoder's sparse kind: term_frequency (BM25-weighted by the "
        "pipeline, as for the offline encoder) or learned (stored as it is)",
    )  # fmt: skip
    parser.add_argument(
        "--dimension", type=int, default=Config.dimension, metavar="N",
        help=f"the pass-through encoder's dense dimension (default {Config.dimension}, the "
        "offline encoder's; 1024 is BGE-M3's)",
    )  # fmt: skip
    parser.add_argument(
        "--store", choices=("milvus-lite", "memory"), default="milvus-lite",
        help="the vector store of both sides: a Milvus Lite server, or the in-memory store "
        "(the pipeline's rate is then that of its own work; the raw side's is meaningless)",
    )  # fmt: skip
    parser.add_argument(
        "--database-url", metavar="URL",
        help="metadata on this Postgres server (postgresql+psycopg://...), a database per "
        "run created and dropped by the benchmark; default: SQLite files",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    if not parts or set(parts) - set(Config.parts):
        parser.error(f"--parts: choose from {','.join(Config.parts)}")
    counts = (args.documents, args.end_to_end_documents, args.repeats, args.end_to_end_repeats)
    if min(counts) < 1:
        parser.error("--documents, --end-to-end-documents and the repeats must be >= 1")
    if args.dimension < 2:
        parser.error("--dimension must be >= 2")
    limit = Settings(_env_file=None).ingest.max_documents_per_request
    if args.documents > limit:
        parser.error(
            f"--documents: one job holds at most {limit} (ingest.max_documents_per_request)"
        )

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )  # fmt: skip
    unwind_on_signals()

    documents = corpus_documents(args.dataset, args.documents)
    config = Config(
        end_to_end_documents=min(args.end_to_end_documents, len(documents)),
        repeats=args.repeats,
        end_to_end_repeats=args.end_to_end_repeats,
        sparse_kind=SparseKind(args.sparse_kind),
        dimension=args.dimension,
        parts=parts,
    )

    def encoder() -> Embedder:
        base = Settings(_env_file=None).encoder
        return create_embedder(base.model_copy(update={"kind": EncoderKind(args.encoder)}))

    root = Path(tempfile.mkdtemp(prefix="hsearch-bench-ingest-"))
    milvus: Child | None = None
    target: Target | None = None
    try:
        if args.store == "memory":
            target = InMemoryTarget()
        else:
            milvus, uri = start_milvus_lite(root / "milvus", log=root / "milvus.log")
            target = MilvusTarget(uri, description="Milvus Lite server")
        result = run(
            documents,
            config,
            root=root,
            target=target,
            encoder=encoder,
            dataset=args.dataset.name,
            database_url=args.database_url,
        )
    except KeyboardInterrupt:
        progress("interrupted")
        return INTERRUPTED
    finally:
        if target is not None:
            target.close()
        if milvus is not None:
            milvus.stop(MILVUS_STOP_SECONDS)
        if args.keep:
            progress(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result) if args.json else summary(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
