"""``hsearch run``: the whole local stack in the foreground.

Starts a Milvus Lite gRPC server (unless ``HSEARCH_MILVUS__URI`` points at a server),
applies migrations, makes sure the default tenant has a key (:func:`run_key`), starts
Celery worker process(es) and the API (uvicorn), waits until the API is ready, ingests
the bundled sample corpus on first start (through the API, with that key) and prints the
key and a search to paste.

A worker that dies is started again (at most :data:`MAX_RESTARTS` times in
:data:`RESTART_WINDOW_S`; a worker is one process, which runs its tasks itself, so a
``kill -9`` of any worker process is seen here), and the API keeps serving meanwhile;
the job it held is sent again once its lease expires
(:mod:`hsearch.ingestion.worker.leases`). If the API or Milvus dies, the stack stops.
SIGINT/SIGTERM stop every child within :data:`STOP_TIMEOUT_S` seconds, even in the
middle of a job (the interrupted batch is redone after a restart); children also die
with this process (``PR_SET_PDEATHSIG``), so nothing is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

from hsearch.config import Settings
from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.migrate import upgrade_database
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.embedding.factory import describe_encoder_choice
from hsearch.errors import AuthenticationError, ConfigurationError
from hsearch.ingestion.operations.datadir import check_data_directory
from hsearch.ingestion.queue import CeleryJobQueue, create_celery
from hsearch.llm.local import PACKAGED_MODEL_NAME, packaged_model_path
from hsearch.local.processes import (
    MILVUS_CHILD,
    MODEL_CHILD,
    Child,
    free_port,
    port_open,
    start_api,
    start_milvus_lite,
    start_model_server,
    stop_all,
    worker_command,
)
from hsearch.metrics.exposition import MULTIPROC_ENV, prepare_multiprocess_dir
from hsearch.tenancy.factory import open_tenancy
from hsearch.types import Scope

# SIGKILL after 3 s leaves 2 s of the 5 s promise for the kill, the reaping and the
# exit, which on a loaded 2-core machine took up to 1.1 s beyond the grace period.
STOP_TIMEOUT_S = 3.0
"""Ctrl-C to every process gone: SIGTERM to all at once, SIGKILL to what is left then."""
MAX_RESTARTS = 5
RESTART_WINDOW_S = 300.0
RUN_KEY_FILE = "run-api-key"
"""Where ``hsearch run`` keeps the default tenant's key, in the data directory (0600)."""
RUN_ACTOR = "hsearch run"


def sample_documents() -> list[dict[str, Any]]:
    path = files("hsearch") / "samples" / "corpus.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def say(message: str, *, err: bool = False) -> None:
    """Operator-facing output of ``hsearch run`` (its logs go to files)."""
    print(f"[hsearch] {message}", file=sys.stderr if err else sys.stdout, flush=True)


def run_stack(settings: Settings, *, ingest_sample: bool = True, workers: int = 1) -> int:
    """Run until SIGINT/SIGTERM or until a child dies; returns the exit code."""
    data = settings.data_dir.resolve()
    (data / "logs").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["HSEARCH_DATA_DIR"] = str(data)
    if "HSEARCH_LOG_FORMAT" not in env and sys.stdout.isatty():
        # The API writes to this terminal: plain lines for a person, in every child
        # (JSON, what log collectors read, when the output is piped or as set).
        env["HSEARCH_LOG_FORMAT"] = "text"
    # Every child records its metrics here; the API's /metrics adds them up. Emptied
    # now: an earlier run's samples are not this one's (docs/metrics.md).
    metrics_dir = Path(env.get(MULTIPROC_ENV) or data / "metrics")
    env[MULTIPROC_ENV] = str(prepare_multiprocess_dir(metrics_dir))
    children: list[Child] = []

    def _stop(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    # Installed explicitly: a shell that starts us in the background ignores SIGINT.
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        # Migrated first: the data directory's vector data is checked against the
        # database's identity before any process serves it (hsearch.ingestion.operations.datadir).
        _prepare(settings)
        check_data_directory(settings)
        env["HSEARCH_MILVUS__URI"] = _milvus(settings, env, data, children)
        model = _model(settings, env, data, children)
        key = run_key(settings)
        children.extend(_worker(i, settings, env, data) for i in range(workers))
        api_url = _api(settings, env, children)
        if ingest_sample and _tenant_is_empty(settings):
            _ingest_sample(api_url, key)
        _print_banner(api_url, data / "logs", key)
        restarts: deque[float] = deque()
        while True:
            for i, child in enumerate(children):
                if child.alive():
                    continue
                code = child.proc.returncode
                if child.name == MODEL_CHILD and model is not None:
                    # Answers degrade meanwhile (answer null); the stack goes on.
                    children[i] = model.restart(child, code)
                    continue
                if not child.name.startswith("worker-") or not _may_restart(restarts):
                    say(f"{child.name} exited with code {code}; stopping", err=True)
                    return 1
                say(f"{child.name} exited with code {code}; starting it again", err=True)
                child.stop()  # closes its log
                children[i] = _worker(int(child.name.split("-", 1)[1]), settings, env, data)
            time.sleep(0.5)
    except KeyboardInterrupt:
        return 0
    except ConfigurationError as exc:
        say(exc.message, err=True)
        return 2
    finally:
        if children:
            say("stopping...", err=True)
        services = [c for c in children if c.name in (MILVUS_CHILD, MODEL_CHILD)]
        users = [c for c in reversed(children) if c.name not in (MILVUS_CHILD, MODEL_CHILD)]
        stop_all(users, last=services, timeout=STOP_TIMEOUT_S)


@dataclass
class _LocalModel:
    """The local model server ``hsearch run`` started, and how to start it again on the
    same address (the API keeps its base URL)."""

    settings: Settings
    model: Path
    host: str
    port: int
    log: Path
    env: dict[str, str]
    last_start: float = 0.0

    def start(self) -> Child:
        self.last_start = time.monotonic()
        child, _ = start_model_server(
            self.model,
            alias=PACKAGED_MODEL_NAME
            if self.settings.llm.local_model_path is None
            else self.model.stem,
            host=self.host,
            port=self.port,
            threads=self.settings.llm.local_threads,
            context=self.settings.llm.local_context,
            log=self.log,
            env=self.env,
        )
        return child

    def restart(self, dead: Child, code: int | None) -> Child:
        """A new server in place of ``dead`` (at most one start every
        :data:`MODEL_RESTART_INTERVAL_S`; until then ``dead`` is kept, and tried again)."""
        if time.monotonic() - self.last_start < MODEL_RESTART_INTERVAL_S:
            return dead
        say(f"the model server exited with code {code}; starting it again", err=True)
        dead.stop()
        try:
            return self.start()
        except ConfigurationError as exc:
            say(f"the model server did not start again: {exc.message}", err=True)
            return dead


MODEL_RESTART_INTERVAL_S = 5.0


def _model(
    settings: Settings, env: dict[str, str], data: Path, children: list[Child]
) -> _LocalModel | None:
    """The local model server, unless an endpoint is configured (``llm.base_url``);
    sets the API's ``HSEARCH_LLM__BASE_URL`` and ``HSEARCH_LLM__MODEL`` to it."""
    if settings.llm.base_url:
        say(f"model endpoint {settings.llm.base_url} (model {settings.llm.model})")
        return None
    path = settings.llm.local_model_path or packaged_model_path()
    host = settings.llm.local_host
    port = settings.llm.local_port or free_port(host)
    local = _LocalModel(settings, path, host, port, data / "logs" / "model.log", env)
    children.append(local.start())
    alias = PACKAGED_MODEL_NAME if settings.llm.local_model_path is None else path.stem
    env["HSEARCH_LLM__BASE_URL"] = f"http://{host}:{port}/v1"
    env["HSEARCH_LLM__MODEL"] = alias
    say(f"model server on http://{host}:{port}/v1 serving {path.name} as {alias!r}")
    return local


def _worker(index: int, settings: Settings, env: dict[str, str], data: Path) -> Child:
    return Child(
        f"worker-{index}",
        argv=worker_command(f"worker{index}@%h", loglevel=settings.log_level),
        env=env,
        log=data / "logs" / f"worker-{index}.log",
    )


def _may_restart(restarts: deque[float]) -> bool:
    """Whether a dead worker may be started again: at most MAX_RESTARTS within the
    last RESTART_WINDOW_S (a worker that cannot start is not restarted forever)."""
    now = time.monotonic()
    while restarts and now - restarts[0] > RESTART_WINDOW_S:
        restarts.popleft()
    if len(restarts) >= MAX_RESTARTS:
        return False
    restarts.append(now)
    return True


def _milvus(settings: Settings, env: dict[str, str], data: Path, children: list[Child]) -> str:
    """The Milvus URI the children use; starts a Milvus Lite server unless one is set."""
    uri = settings.milvus.uri
    if uri:
        if not uri.startswith(("http://", "https://", "tcp://")):
            msg = (
                "HSEARCH_MILVUS__URI is a local file; the stack runs several processes, "
                "which need a Milvus server (leave it unset to start Milvus Lite)"
            )
            raise ConfigurationError(msg)
        return uri
    milvus, uri = start_milvus_lite(
        data / "milvus",
        log=data / "logs" / "milvus.log",
        host=settings.milvus.lite_host,
        port=settings.milvus.lite_port,
        env=env,
    )
    children.append(milvus)
    say(f"Milvus Lite server on {uri} (data in {data / 'milvus'})")
    return uri


@contextlib.contextmanager
def milvus_for_command(settings: Settings, *, check_owner: bool = True) -> Iterator[str]:
    """The Milvus URI an operator command (``hsearch reindex``) works on: the configured
    one; else the embedded profile's Milvus Lite server, the one ``hsearch run`` serves
    when it is up, or one started on the same data directory for the command (and
    stopped after it). The data directory's vector data must be the configured
    database's (:func:`check_data_directory`) unless not ``check_owner`` (``hsearch
    reconcile``, which reports and repairs the drift of another database's data)."""
    if settings.milvus.uri:
        yield settings.milvus.uri
        return
    if check_owner:
        check_data_directory(settings)
    host, port = settings.milvus.lite_host, settings.milvus.lite_port
    if port_open(port, host=host):
        yield f"http://{host}:{port}"
        return
    data = settings.data_dir.resolve()
    (data / "logs").mkdir(parents=True, exist_ok=True)
    milvus, uri = start_milvus_lite(
        data / "milvus", log=data / "logs" / "milvus.log", host=host, port=port, env=os.environ
    )
    try:
        yield uri
    finally:
        milvus.stop()


def _prepare(settings: Settings) -> None:
    upgrade_database(settings.database_url)
    say(f"metadata database migrated ({_redact(settings.database_url)})")
    say(f"encoder: {describe_encoder_choice(settings.encoder)}")
    say(f"broker: {_redact(settings.broker_url)}")
    if settings.broker_url.startswith("sqla+"):
        # kombu's SQL transport creates its tables and the queue's row on first use,
        # with no guard against another process doing the same: the API and a worker
        # starting together raced on them, and the worker stopped on the duplicate
        # queue row ("Unrecoverable error ... UNIQUE constraint failed: kombu_queue").
        # Made once here, before either starts.
        CeleryJobQueue(create_celery(settings.broker_url)).depths(timeout_s=30)


def run_key(settings: Settings) -> str:
    """A working key of the default tenant (``api.default_tenant``), every scope: the one
    kept in ``<data_dir>/run-api-key`` while it still authenticates, else a new one
    (the default tenant created first if need be), kept there for the next start.

    The embedded profile is a single-user stack: the data directory already holds the
    server key and the metadata database, so a key in a private file beside them adds no
    exposure, and every start can print a key that works. Nothing else stores a key.
    """
    path = settings.data_dir.resolve() / RUN_KEY_FILE
    tenant = settings.api.default_tenant
    with open_tenancy(settings) as tenancy:
        tenancy.ensure_tenant(tenant, actor=RUN_ACTOR)
        if path.exists():
            key = path.read_text("utf-8").strip()
            try:
                if tenancy.authenticate(key).tenant_id == tenant:
                    return key
            except AuthenticationError:
                pass  # revoked, expired, or from another server key: issue a new one
        created = tenancy.create_key(tenant, scopes=list(Scope), name=RUN_ACTOR, actor=RUN_ACTOR)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(created.key + "\n")
    tmp.replace(path)
    return created.key


def _api(settings: Settings, env: dict[str, str], children: list[Child]) -> str:
    """Start the API (its output goes to our terminal) and wait until it is ready."""
    api, api_url = start_api(
        env, log=None, host=settings.api.host, port=settings.api.port, timeout=300
    )
    children.append(api)
    return api_url


def _tenant_is_empty(settings: Settings) -> bool:
    engine = create_db_engine(settings.database_url)
    try:
        with create_session_factory(engine)() as session:
            return DocumentRepository(session).count(settings.api.default_tenant) == 0
    finally:
        engine.dispose()


def _ingest_sample(api_url: str, key: str) -> None:
    """Send the sample corpus through the API like any client, with the printed key."""
    docs = sample_documents()
    auth = {"Authorization": f"Bearer {key}"}
    resp = httpx.post(f"{api_url}/v1/documents", json={"documents": docs}, headers=auth, timeout=30)
    if resp.status_code != 202:
        say(f"sample ingest refused ({resp.status_code}): {resp.text}", err=True)
        return
    job_url = api_url + resp.json()["status_url"]
    say(f"ingesting {len(docs)} sample documents ({job_url})")
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        job = httpx.get(job_url, headers=auth, timeout=10).json()
        if job["status"] in ("succeeded", "partial", "failed"):
            say(
                f"sample ingest {job['status']}: {job['indexed']} indexed, "
                f"{job['skipped']} skipped, {job['failed']} failed"
            )
            return
        time.sleep(0.5)
    say("sample ingest still running; check the job URL", err=True)


def _print_banner(api_url: str, logs: Path, key: str) -> None:
    """The one place a key is printed: to the terminal of whoever started the stack."""
    body = json.dumps(
        {
            "query": "How does hybrid search combine dense and sparse retrieval?",
            "top_k": 3,
            "group_by_document": True,
        }
    )
    body_ja = json.dumps(
        {"query": "日本の首都はどこですか", "top_k": 3, "group_by_document": True},
        ensure_ascii=False,
    )
    auth = '-H "authorization: Bearer $HSEARCH_API_KEY"'
    json_type = "-H 'content-type: application/json'"
    say(
        f"""ready.
  API docs:  {api_url}/docs
  API key:   export HSEARCH_API_KEY={key}
             (default tenant, every scope; kept in the data directory; docs/api.md)
  Search:    curl -s -X POST {api_url}/v1/search {auth} {json_type} -d '{body}'
  Japanese:  curl -s -X POST {api_url}/v1/search {auth} {json_type} -d '{body_ja}'
  Ops pages: {api_url}/ops/login (an operator credential: `hsearch operator create`)
  Logs:      {logs}
  Ctrl-C stops everything.
"""
    )


def _redact(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url
