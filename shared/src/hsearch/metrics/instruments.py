"""The metrics every process records into, and one function per kind of event.

Names and labels are the agreed ones (docs/metrics.md); alert rules and dashboards are
written against them. Labels are bounded: a route is its template (``/v1/jobs/{job_id}``,
never the path), no query text anywhere, and a tenant is named only when it is in
``metrics.tenant_allow_list`` (:func:`configure`), else counted as ``other``.

In prometheus-client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR`` set before the
process starts) each process writes its samples to files there and a scrape adds them
up (:mod:`hsearch.metrics.exposition`); otherwise they live in the process's default
registry. Recording is the same either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import Counter, Histogram

__all__ = [
    "ANSWER_DURATION",
    "ANSWER_FIRST_TOKEN",
    "ANSWER_REQUESTS",
    "ANSWER_SENTENCES",
    "ANSWER_TOKENS",
    "CACHE_REQUESTS",
    "HTTP_DURATION",
    "HTTP_REQUESTS",
    "INGEST_CHUNKS",
    "INGEST_DOCUMENTS",
    "LEG_DURATION",
    "LEG_OUTCOMES",
    "OTHER_TENANT",
    "SEARCH_REQUESTS",
    "STAGE_DURATION",
    "TIME_TO_SEARCHABLE",
    "configure",
    "record_answer",
    "record_cache",
    "record_http",
    "record_ingest",
    "record_search",
    "record_time_to_searchable",
    "tenant_label",
]

OTHER_TENANT = "other"
"""The ``tenant`` label of every tenant outside the allow-list."""

LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""Seconds: from a cached search (about a millisecond) to a leg's longest deadline."""

SEARCHABLE_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
"""Seconds from a job's submission to its documents being searchable."""

HTTP_REQUESTS = Counter(
    "hsearch_http_requests",
    "API requests answered, by route template, method and status.",
    ["route", "method", "status"],
)
HTTP_DURATION = Histogram(
    "hsearch_http_request_duration_seconds",
    "API request latency, by route template and method.",
    ["route", "method"],
    buckets=LATENCY_BUCKETS,
)
SEARCH_REQUESTS = Counter(
    "hsearch_search_requests",
    "Searches run, by mode and outcome (ok, degraded: a leg failed, error: none answered).",
    ["mode", "outcome", "tenant"],
)
LEG_DURATION = Histogram(
    "hsearch_search_leg_duration_seconds",
    "A search leg's own time (legs run in parallel), for legs that ran.",
    ["leg", "tenant"],
    buckets=LATENCY_BUCKETS,
)
LEG_OUTCOMES = Counter(
    "hsearch_search_leg_outcomes",
    "Search legs by how they ended: ok, timeout, error or skipped (not run).",
    ["leg", "status"],
)
STAGE_DURATION = Histogram(
    "hsearch_search_stage_duration_seconds",
    "Time per stage of the query path (plan, encode, statistics, retrieval, fusion, "
    "facets, rerank, hydrate); the stages of one search add up to its time.",
    ["stage"],
    buckets=LATENCY_BUCKETS,
)
CACHE_REQUESTS = Counter(
    "hsearch_cache_requests",
    "Cache lookups by cache (result, embedding) and result (hit, miss, error).",
    ["cache", "result"],
)
INGEST_DOCUMENTS = Counter(
    "hsearch_ingest_documents",
    "Documents ingest jobs ended with, by outcome (indexed, skipped, failed, deleted).",
    ["outcome"],
)
INGEST_CHUNKS = Counter("hsearch_ingest_chunks", "Chunks written to the vector store.")
TIME_TO_SEARCHABLE = Histogram(
    "hsearch_time_to_searchable_seconds",
    "From a job's submission to its documents being searchable (the job's end, after "
    "the store flush), for jobs that ended succeeded or partial.",
    buckets=SEARCHABLE_BUCKETS,
)

ANSWER_BUCKETS = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0)
"""Seconds: a model's first token and whole answers, from a fast endpoint to the
small local model on a busy machine."""

ANSWER_REQUESTS = Counter(
    "hsearch_answer_requests",
    "Answers, by model and outcome (answered; degraded: no answer, passages only).",
    ["model", "outcome", "tenant"],
)
ANSWER_DURATION = Histogram(
    "hsearch_answer_duration_seconds",
    "A whole answer's time: retrieval, packing and generation.",
    ["model"],
    buckets=ANSWER_BUCKETS,
)
ANSWER_FIRST_TOKEN = Histogram(
    "hsearch_answer_first_token_seconds",
    "From an answer's request to the model's first token.",
    ["model"],
    buckets=ANSWER_BUCKETS,
)
ANSWER_TOKENS = Counter(
    "hsearch_answer_tokens",
    "Tokens sent to (in) and written by (out) the model, as its endpoint counted them.",
    ["model", "direction", "tenant"],
)
ANSWER_SENTENCES = Counter(
    "hsearch_answer_sentences",
    "Answer sentences by whether a passage supports them (supported, unsupported).",
    ["model", "support"],
)

_allowed: frozenset[str] = frozenset()

SEARCH_OUTCOMES = ("ok", "degraded", "error")
CACHE_RESULTS = ("hit", "miss", "error")
INGEST_OUTCOMES = ("indexed", "skipped", "failed", "deleted")


def configure(*, tenant_allow_list: Iterable[str]) -> None:
    """The tenants named in ``tenant`` labels (``metrics.tenant_allow_list``)."""
    global _allowed  # noqa: PLW0603 - one allow-list per process, from its settings
    _allowed = frozenset(tenant_allow_list)


def tenant_label(tenant: str) -> str:
    """``tenant`` when it is in the allow-list, else :data:`OTHER_TENANT`."""
    return tenant if tenant in _allowed else OTHER_TENANT


def record_http(*, route: str, method: str, status: int, seconds: float) -> None:
    """One answered API request; ``route`` is the route template."""
    HTTP_REQUESTS.labels(route, method, str(status)).inc()
    HTTP_DURATION.labels(route, method).observe(seconds)


def record_search(
    *,
    tenant: str,
    mode: str,
    outcome: str,
    legs: Iterable[tuple[str, str, float]] = (),
    stages_ms: Mapping[str, float] | None = None,
) -> None:
    """One search: its ``outcome`` (``ok``, ``degraded``, ``error``), each leg as
    ``(leg, status, took_ms)`` and, when it ran to the end, the time of each stage in
    milliseconds. A skipped leg is counted, not timed."""
    if outcome not in SEARCH_OUTCOMES:
        msg = f"outcome: one of {', '.join(SEARCH_OUTCOMES)}, not {outcome!r}"
        raise ValueError(msg)
    label = tenant_label(tenant)
    SEARCH_REQUESTS.labels(mode, outcome, label).inc()
    for leg, status, took_ms in legs:
        LEG_OUTCOMES.labels(leg, status).inc()
        if status != "skipped":
            LEG_DURATION.labels(leg, label).observe(took_ms / 1000)
    for stage, ms in (stages_ms or {}).items():
        STAGE_DURATION.labels(stage).observe(ms / 1000)


def record_cache(cache: str, result: str) -> None:
    """One cache lookup: ``cache`` is ``result`` or ``embedding``, ``result`` one of
    ``hit``, ``miss`` or ``error`` (Redis did not answer: the lookup counts as a miss
    for the search, and as an error here)."""
    if result not in CACHE_RESULTS:
        msg = f"result: one of {', '.join(CACHE_RESULTS)}, not {result!r}"
        raise ValueError(msg)
    CACHE_REQUESTS.labels(cache, result).inc()


def record_ingest(*, outcome: str, documents: int, chunks: int = 0) -> None:
    """``documents`` that ended with ``outcome``; ``chunks`` written for them."""
    if outcome not in INGEST_OUTCOMES:
        msg = f"outcome: one of {', '.join(INGEST_OUTCOMES)}, not {outcome!r}"
        raise ValueError(msg)
    if documents:
        INGEST_DOCUMENTS.labels(outcome).inc(documents)
    if chunks:
        INGEST_CHUNKS.inc(chunks)


def record_time_to_searchable(seconds: float) -> None:
    """A job's documents became searchable ``seconds`` after it was submitted."""
    TIME_TO_SEARCHABLE.observe(max(0.0, seconds))


def record_answer(
    *,
    tenant: str,
    model: str,
    answered: bool,
    seconds: float,
    first_token_s: float | None,
    tokens_in: int | None,
    tokens_out: int | None,
    supported: int,
    unsupported: int,
) -> None:
    """One answer: its outcome, times, tokens and how many sentences passages support."""
    label = tenant_label(tenant)
    ANSWER_REQUESTS.labels(model, "answered" if answered else "degraded", label).inc()
    ANSWER_DURATION.labels(model).observe(seconds)
    if first_token_s is not None:
        ANSWER_FIRST_TOKEN.labels(model).observe(first_token_s)
    if tokens_in:
        ANSWER_TOKENS.labels(model, "in", label).inc(tokens_in)
    if tokens_out:
        ANSWER_TOKENS.labels(model, "out", label).inc(tokens_out)
    if supported:
        ANSWER_SENTENCES.labels(model, "supported").inc(supported)
    if unsupported:
        ANSWER_SENTENCES.labels(model, "unsupported").inc(unsupported)
