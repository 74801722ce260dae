"""The retrieval stage: encode the query for the legs that run, run them in parallel,
and bring every candidate to a chunk with its fields.

A leg is a registered source (:mod:`hsearch.search.sources`) asked with a value,
:class:`LegRequest` (the source's name, a :class:`~hsearch.search.sources.SourceQuery`
and a deadline), like pymilvus's ``AnnSearchRequest`` or qdrant's ``Prefetch``:
another signal is another registration, not another method. The legs of a round run
concurrently (:func:`asyncio.gather`); each answers, fails (``error``) or misses its
deadline (``timeout``) on its own, and a leg that is not run is reported ``skipped``.

One :class:`~hsearch.budget.Budget` per request, counted from its start, covers
encoding, the tenant statistics and the legs together; a leg gets what is left of it
when it starts. The encoder computes only what the legs about to run read
(:class:`~hsearch.search.sources.Need`: a keyword search no dense vector). Legs the plan
holds back (:class:`~hsearch.search.planner.LegRole`) run in a second round, encoded
then, only if the first round's answers make them count; a source that reads the
first round's candidates runs there too, given them.

Encoding is bounded by the budget too, and its failure need not end the search. When
the model fails or misses its deadline, an encoder whose query sparse side needs no
model (:attr:`~hsearch.embedding.protocol.EncoderInfo.sparse_needs_model` false: the
offline encoder's term counts) makes that side without it
(:meth:`~hsearch.embedding.protocol.Embedder.embed_query_without_model`) and the keyword
leg runs: the keyword fallback. The legs that read the dense vector are reported
``error`` or ``timeout``, their error ending in ``keyword fallback``, like any degraded
leg. With a fallback to run, encoding may take only a share of the budget
(``search.fallback_encode_share``), so that the keyword leg keeps the rest. Without one
(BGE-M3, whose two sides both come from the model, or a search with no keyword leg)
encoding may take all of it, a model error ends the search as it always did (500
``encoder_error``) and a missed deadline is every leg's timeout (503
``search_unavailable``). Once the model failed, a search does not ask it again.

Every candidate leaves this stage as a chunk with its stored fields, whichever source
found it: a chunk id that came bare is read by id (and dropped unless it is the
tenant's and passes the search's filter); a document is brought to its best chunk,
the one another leg ranked highest, else the one the store scores best for the query
(:meth:`~hsearch.vectorstore.protocol.VectorStore.best_chunks`), under the same filter.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import anyio.to_thread

from hsearch.budget import Budget
from hsearch.cache.embeddings import QueryEncoder, normalise_query
from hsearch.config import SearchSettings
from hsearch.embedding.protocol import Embedder, Embedding, SparseKind
from hsearch.errors import BackendError, EncoderError, VectorStoreTimeoutError
from hsearch.lexical.additions import (
    Expanded,
    TermExpansion,
    expand_learned,
    expand_query,
    expansion_candidates,
)
from hsearch.lexical.bm25 import bm25_idf
from hsearch.lexical.coverage import query_coverage, query_words, vector_coverage
from hsearch.lexical.expansion import QueryExpander
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.lexical.syntax import parse_query
from hsearch.lexical.typos import fold_word
from hsearch.search.models import LegReport
from hsearch.search.planner import LegRole, SearchPlan
from hsearch.search.sources import Level, Need, SourceQuery, SourceRegistry
from hsearch.search.timings import Stage, StageClock
from hsearch.search.totals import Matches
from hsearch.types import DenseVector, Leg, LegStatus, SparseVector
from hsearch.vectorstore.filters import matches as passes
from hsearch.vectorstore.protocol import StoredHit, VectorStore

__all__ = [
    "DEADLINE_MARGIN_S",
    "KEYWORD_FALLBACK",
    "LegOutcome",
    "LegRequest",
    "MatchRequest",
    "QueryVectors",
    "Retrieval",
    "Retriever",
    "SideFailure",
]

logger = logging.getLogger(__name__)

# Extra time granted past a leg's deadline for the store's own timeout to land (it
# then reports why) before the leg is cancelled.
DEADLINE_MARGIN_S = 0.05

_NO_TIME_LEFT = "no time left of the request's budget to run it"
_NO_WEIGHTS = SparseVector((), ())

KEYWORD_FALLBACK = "keyword fallback"
"""What ends the error of a leg that could not read the query because encoding failed,
when the keyword leg ran without the model instead."""

DEFAULT_FALLBACK_ENCODE_SHARE: float = SearchSettings.model_fields["fallback_encode_share"].default
"""``search.fallback_encode_share``'s default: a retriever built without the settings."""


@dataclass(frozen=True, slots=True)
class SideFailure:
    """Why a side of the query could not be made: the legs that read it end so."""

    status: LegStatus
    """``error`` or ``timeout``."""
    error: str


@dataclass(frozen=True, slots=True)
class QueryVectors:
    """What the query was encoded into so far, and why a side could not be made."""

    dense: DenseVector | None = None
    sparse: SparseVector | None = None
    expansions: tuple[TermExpansion, ...] = ()
    """What the sparse side searches beyond the words typed (typos, prefix, synonyms)."""
    failed: Mapping[Need, SideFailure] = field(default_factory=dict)
    """A side that could not be made (the sparse side when the tenant's statistics
    cannot be read, the dense side when the model failed), with why: the legs that need
    it fail, not the search."""
    model_failure: SideFailure | None = None
    """How query encoding failed, if it did: the model is not asked again in this
    search (a later round makes the sparse side without it, where the encoder can)."""
    max_document_frequency: int = 0
    """The largest document frequency among the query's terms in the tenant's statistics
    (read with them when weighing the sparse side; 0 when they were not read: an encoder
    whose sparse side is not term counts)."""
    document_count: int = 0
    """The tenant's chunks the sparse side was weighed with (0 when it was not: an
    encoder whose sparse side is not term counts)."""

    def has(self, need: Need) -> bool:
        if need is Need.DENSE:
            return self.dense is not None
        if need is Need.SPARSE:
            return self.sparse is not None
        return True

    def missing(self, needs: Collection[Need]) -> SideFailure | None:
        """Why the first of ``needs`` that could not be made was not, if any was not."""
        return next((self.failed[n] for n in needs if n in self.failed), None)


@dataclass(frozen=True, slots=True)
class LegRequest:
    """One leg to run: which source, what it is asked, and by when (a
    :func:`time.perf_counter` instant). The tenant goes with every leg."""

    leg: str
    query: SourceQuery
    deadline: float


@dataclass(frozen=True, slots=True)
class LegOutcome:
    """How a leg went: its candidates (``None`` unless it answered) and its report."""

    leg: str
    hits: tuple[StoredHit, ...] | None
    report: LegReport


@dataclass(frozen=True, slots=True)
class MatchRequest:
    """Count the keyword matches too (:meth:`VectorStore.match_sparse`): up to ``limit``,
    with ``fields``. Runs after the sparse leg, only if it filled its window, while the
    other legs may still run; under the request's deadline."""

    limit: int
    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Retrieval:
    outcomes: tuple[LegOutcome, ...]
    """One per leg of the plan, in its order; every hit a chunk with its fields."""
    matches: Matches | None = None
    """The keyword matches, when asked for and counted in time."""
    known_matches: int = 0
    """How many chunks match a keyword query term at the least, as the tenant's term
    statistics tell without counting them (the largest document frequency among the
    query's terms); 0 when unknown, and under a filter (they count the whole tenant)."""
    embedding_cached: bool = False
    """Every query vector came from the query-embedding cache (the model did not run)."""
    expansions: tuple[TermExpansion, ...] = ()
    """What the keyword leg searched beyond the words typed."""
    texts: Mapping[str, str] = field(default_factory=dict)
    """Candidates' texts read on the way (to check the syntax's conditions)."""
    filled: frozenset[str] = frozenset()
    """The legs that filled their depth before the syntax's conditions dropped
    candidates: more would have followed, whatever count is left."""
    keyword_coverage: float | None = None
    """The share of the query the keyword leg's first candidate holds
    (:mod:`hsearch.lexical.coverage`), when the plan's fusion reads it and the keyword
    leg found something; ``None`` otherwise, or when its terms could not be read."""


class Retriever:
    """Encodes queries and runs the registered sources (legs)."""

    def __init__(
        self,
        *,
        embedder: Embedder,
        store: VectorStore,
        statistics: LexicalStatistics,
        sources: SourceRegistry,
        queries: QueryEncoder | None = None,
        expander: QueryExpander | None = None,
        fallback_encode_share: float = DEFAULT_FALLBACK_ENCODE_SHARE,
    ) -> None:
        if not 0.0 < fallback_encode_share <= 1.0:
            msg = f"fallback_encode_share must be within (0, 1], got {fallback_encode_share!r}"
            raise ValueError(msg)
        self._embedder = embedder
        self._fallback_encode_share = fallback_encode_share
        self._expander = expander
        self._queries = queries or QueryEncoder(embedder)
        self._store = store
        self._statistics = statistics
        self._sources = sources

    @property
    def sources(self) -> SourceRegistry:
        return self._sources

    async def retrieve(
        self,
        plan: SearchPlan,
        *,
        budget: Budget,
        clock: StageClock,
        matches: MatchRequest | None = None,
    ) -> Retrieval:
        """Run the plan's legs: the primary ones, then those held back if they are due
        (with the primary legs' candidates for the sources that read them); with
        ``matches``, count the keyword matches of a primary sparse leg that filled its
        window. Then every candidate is brought to a chunk with its fields.

        Charges ``clock`` with the encode, statistics and retrieval stages.
        """
        outcomes = {p.leg: _skipped(p.leg) for p in plan.legs}
        encoded: list[bool] = []
        vectors = QueryVectors()
        # Without the syntax's conditions the keyword leg's first candidate stays first:
        # its terms are read as soon as the leg answers, while the other legs run.
        terms: dict[str, frozenset[int] | None] | None = (
            {} if plan.ranking.keyword_coverage and not plan.constrained else None
        )
        first, counted, vectors = await self._round(
            plan,
            legs=plan.legs_in(LegRole.PRIMARY),
            budget=budget,
            clock=clock,
            vectors=vectors,
            matches=matches,
            encoded=encoded,
            terms=terms,
        )
        outcomes.update(first)
        answers = [o.hits for o in first.values()]
        later = [p.leg for p in plan.legs if p.role is not LegRole.PRIMARY and p.role.due(answers)]
        if later:
            earlier = {leg: o.hits for leg, o in first.items() if o.hits is not None}
            second, _, vectors = await self._round(
                plan,
                legs=later,
                budget=budget,
                clock=clock,
                vectors=vectors,
                encoded=encoded,
                earlier=earlier,
            )
            outcomes.update(second)
        resolved = await self._resolve(plan, outcomes, vectors=vectors, budget=budget)
        texts: dict[str, str] = {}
        filled: frozenset[str] = frozenset()
        if plan.constrained:
            resolved, texts, filled = await self._constrain(plan, resolved, budget=budget)
        coverage = await self._keyword_coverage(
            plan, resolved, vectors=vectors, budget=budget, read=terms or {}
        )
        clock.lap(Stage.RETRIEVAL)
        return Retrieval(
            tuple(resolved[p.leg] for p in plan.legs),
            counted,
            known_matches=vectors.max_document_frequency if plan.filter is None else 0,
            embedding_cached=bool(encoded) and all(encoded),
            expansions=vectors.expansions,
            texts=texts,
            filled=filled,
            keyword_coverage=coverage,
        )

    async def _keyword_coverage(
        self,
        plan: SearchPlan,
        outcomes: Mapping[str, LegOutcome],
        *,
        vectors: QueryVectors,
        budget: Budget,
        read: Mapping[str, frozenset[int] | None],
    ) -> float | None:
        """:attr:`Retrieval.keyword_coverage`: the keyword leg's first candidate's terms,
        as read when the leg answered (``read``) or now, by primary key under what is
        left of ``budget``. A failed read costs the reading, not the search (fusion then
        reads the legs' scores alone)."""
        sparse = outcomes.get(Leg.SPARSE.value)
        if not plan.ranking.keyword_coverage or vectors.sparse is None:
            return None
        if sparse is None or not sparse.hits:
            return None
        first = sparse.hits[0].chunk_id
        if first in read:  # read when the leg answered (None: that read failed)
            held = read[first]
        else:
            held = await self._first_terms(plan.tenant_id, first, deadline=budget.deadline)
        if held is None:  # unreadable, or deleted since the leg ran
            return None
        if self._embedder.info.sparse_kind is SparseKind.TERM_FREQUENCY:
            words = query_words(plan.text, vectors.expansions)
            if not words:  # nothing of the query weighs: no share to read
                return None
            return query_coverage(
                words,
                held,
                weights=vectors.sparse.to_dict(),
                unheld_weight=bm25_idf(0, document_count=max(vectors.document_count, 1)),
            )
        return vector_coverage(vectors.sparse, held)

    async def run(self, requests: Sequence[LegRequest]) -> list[LegOutcome]:
        """Run ``requests`` concurrently; one outcome each, in order."""
        return list(await asyncio.gather(*(self.run_leg(r) for r in requests)))

    async def run_leg(self, request: LegRequest) -> LegOutcome:
        """Run one leg under its deadline; a failure or timeout is reported, not raised."""
        started = time.perf_counter()
        remaining = request.deadline - started
        if remaining <= 0:
            return _failed(request.leg, LegStatus.TIMEOUT, _NO_TIME_LEFT, started=started)
        source = self._sources[request.leg]
        try:
            hits = await asyncio.wait_for(
                source.search(request.query, timeout=remaining), remaining + DEADLINE_MARGIN_S
            )
        except TimeoutError:
            status, error = LegStatus.TIMEOUT, f"no answer within {remaining:.3f}s"
        except VectorStoreTimeoutError as exc:  # the store's own deadline fired
            status, error = LegStatus.TIMEOUT, f"{type(exc).__name__}: {exc.message}"
        except BackendError as exc:  # a failing backend degrades the leg, not the request
            status, error = LegStatus.ERROR, f"{type(exc).__name__}: {exc.message}"
        else:
            took = (time.perf_counter() - started) * 1000
            kept = tuple(hits[: request.query.limit])
            report = LegReport(request.leg, LegStatus.OK, took, len(kept))
            return LegOutcome(request.leg, kept, report)
        return _failed(request.leg, status, error, started=started)

    async def encode(
        self,
        plan: SearchPlan,
        *,
        needs: Collection[Need],
        clock: StageClock,
        budget: Budget,
        known: QueryVectors | None = None,
        encoded: list[bool] | None = None,
    ) -> QueryVectors:
        """``known`` with the query vectors ``needs`` asks for added, and nothing else;
        appends to ``encoded`` whether they came from the query-embedding cache.

        A side that cannot be made (the sparse side when the tenant's statistics cannot
        be read: the metadata database down; a side the model was to make when it
        failed or missed its deadline, unless the encoder makes it without the model:
        the keyword fallback, in the module docstring) is recorded in ``failed``: the
        legs that need it fail, not the search. Encoding takes at most what
        :meth:`encode_timeout` allows of ``budget``.

        Raises:
            EncoderError, BackendError: The model failed and there is no keyword
                fallback (the error as the encoder raised it).

        Encoding is tenant-independent (so its cache serves every tenant); raw term
        counts then get the tenant's IDF (BM25 as an inner product: the query side
        carries the IDF) as a stage of its own, after the cache.
        """
        vectors = known or QueryVectors()
        dense = (
            Need.DENSE in needs and not vectors.has(Need.DENSE) and Need.DENSE not in vectors.failed
        )
        sparse = (
            Need.SPARSE in needs
            and not vectors.has(Need.SPARSE)
            and Need.SPARSE not in vectors.failed
        )
        if not dense and not sparse:
            return vectors
        embedding, vectors = await self._embed(
            plan, dense=dense, sparse=sparse, budget=budget, vectors=vectors, encoded=encoded
        )
        clock.lap(Stage.ENCODE)
        if dense and Need.DENSE not in vectors.failed:
            vectors = replace(vectors, dense=embedding.dense)
        if sparse and Need.SPARSE not in vectors.failed:
            weights = embedding.sparse
            if self._embedder.info.sparse_kind is SparseKind.TERM_FREQUENCY:
                weigh = partial(self._statistics.weigh_query_terms, plan.tenant_id, weights)
                try:
                    weighed = await anyio.to_thread.run_sync(weigh)
                except BackendError as exc:
                    clock.lap(Stage.STATISTICS)
                    failure = SideFailure(LegStatus.ERROR, f"{type(exc).__name__}: {exc.message}")
                    return replace(vectors, failed={**vectors.failed, Need.SPARSE: failure})
                vectors = replace(
                    vectors,
                    max_document_frequency=weighed.max_document_frequency,
                    document_count=weighed.document_count,
                )
                expanded = await self._expand(plan, weighed.weights)
                weights, vectors = expanded.vector, replace(vectors, expansions=expanded.expansions)
                clock.lap(Stage.STATISTICS)
            else:
                expanded = await self._expand_learned(plan, weights)
                weights, vectors = expanded.vector, replace(vectors, expansions=expanded.expansions)
                clock.lap(Stage.ENCODE)
            vectors = replace(vectors, sparse=weights)
        return vectors

    def keyword_fallback(self, plan: SearchPlan) -> bool:
        """Whether ``plan``'s keyword leg can run when query encoding fails: the encoder
        makes the query's sparse side without the model, and a leg of the plan reads it."""
        return not self._embedder.info.sparse_needs_model and any(
            Need.SPARSE in self._sources[p.leg].needs for p in plan.legs
        )

    def encode_timeout(self, plan: SearchPlan, budget: Budget) -> float:
        """How long query encoding may take now: with a keyword fallback, its share of
        what is left of ``budget`` (the keyword leg keeps the rest); else all of it."""
        remaining = budget.remaining_s()
        return remaining * self._fallback_encode_share if self.keyword_fallback(plan) else remaining

    async def _embed(
        self,
        plan: SearchPlan,
        *,
        dense: bool,
        sparse: bool,
        budget: Budget,
        vectors: QueryVectors,
        encoded: list[bool] | None,
    ) -> tuple[Embedding, QueryVectors]:
        """The sides of the query asked for, from the model through the query-embedding
        cache, within :meth:`encode_timeout`; when the model fails or misses it (or did
        earlier in the search), the sparse side made without it, where the encoder can,
        and the sides that could not be made in ``failed`` of the vectors returned."""
        failure = vectors.model_failure
        fallback = self.keyword_fallback(plan)
        if failure is None:
            timeout = self.encode_timeout(plan, budget)
            try:
                embedding, cached = await asyncio.wait_for(
                    self._queries.embed_query(plan.text, dense=dense, sparse=sparse),
                    max(timeout, 0.0),
                )
            except TimeoutError:
                failure = SideFailure(
                    LegStatus.TIMEOUT,
                    f"query encoding missed its deadline (no answer within {timeout:.3f}s)",
                )
            except (EncoderError, BackendError) as exc:
                if not fallback:
                    raise
                failure = SideFailure(
                    LegStatus.ERROR, f"query encoding failed ({type(exc).__name__}: {exc.message})"
                )
            else:
                if encoded is not None:
                    encoded.append(cached)
                return embedding, vectors
            logger.warning(
                "search.encode.failed status=%s fallback=%s error=%s",
                failure.status,
                "keyword" if fallback else "none",
                failure.error,
            )
            vectors = replace(vectors, model_failure=failure)
        # Never the cache: it holds what the model computed, and the model did not.
        made = (
            self._embedder.embed_query_without_model(normalise_query(plan.text)) if sparse else None
        )
        failed = dict(vectors.failed)
        if sparse and made is None:
            failed[Need.SPARSE] = failure
        if dense:
            ending = f"; {KEYWORD_FALLBACK}" if fallback else ""
            failed[Need.DENSE] = replace(failure, error=f"{failure.error}{ending}")
        embedding = Embedding(dense=(), sparse=made if made is not None else _NO_WEIGHTS)
        return embedding, replace(vectors, failed=failed)

    async def _expand(self, plan: SearchPlan, weights: SparseVector) -> Expanded:
        """The sparse side with the typo corrections, completions and synonyms the plan
        asks for (:mod:`hsearch.lexical.additions`); as it was when the tenant's
        lexicon cannot be read (logged: the search goes on without them)."""
        if self._expander is None:
            return Expanded(weights)
        expander, statistics = self._expander, self._statistics
        words = plan.syntax.words if plan.syntax is not None else parse_query(plan.text).words

        def run() -> Expanded:
            return expand_query(
                words=words,
                text=plan.text,
                weights=weights,
                lexicon=expander.lexicon(plan.tenant_id),
                weigh=partial(statistics.weigh_query, plan.tenant_id),
                typos=plan.typo_tolerance,
                prefix=plan.prefix,
            )

        try:
            return await anyio.to_thread.run_sync(run)
        except BackendError as exc:
            logger.warning("search.expansion.failed error=%s: %s", type(exc).__name__, exc)
            return Expanded(weights)

    async def _expand_learned(self, plan: SearchPlan, weights: SparseVector) -> Expanded:
        """:meth:`_expand` for a learned sparse encoder (BGE-M3): a word is known when
        the tenant's vocabulary lists it, and each addition is encoded by the encoder
        (the query-embedding cache and batcher serve these calls too)."""
        expander = self._expander
        if expander is None:
            return Expanded(weights)
        words = plan.syntax.words if plan.syntax is not None else parse_query(plan.text).words
        try:
            lexicon = await anyio.to_thread.run_sync(expander.lexicon, plan.tenant_id)
        except BackendError as exc:
            logger.warning("search.expansion.failed error=%s: %s", type(exc).__name__, exc)
            return Expanded(weights)
        candidates = expansion_candidates(
            words=words,
            text=plan.text,
            lexicon=lexicon,
            known=lambda word: fold_word(word) in lexicon.vocabulary,
            typos=plan.typo_tolerance,
            prefix=plan.prefix,
        )
        if not candidates:
            return Expanded(weights)
        matched = list(dict.fromkeys(c.matched for c in candidates))
        encoded = await asyncio.gather(
            *(self._queries.embed_query(m, dense=False, sparse=True) for m in matched)
        )
        vectors = {
            m: e.sparse for m, (e, _) in zip(matched, encoded, strict=True) if e.sparse is not None
        }
        return expand_learned(weights, candidates, vectors)

    async def _constrain(
        self, plan: SearchPlan, outcomes: Mapping[str, LegOutcome], *, budget: Budget
    ) -> tuple[dict[str, LegOutcome], dict[str, str], frozenset[str]]:
        """Each leg's candidates that meet the syntax's conditions (phrases, exclusions),
        the first :attr:`~SearchPlan.candidates` of them; with the texts read for it
        and the legs that filled their depth. A leg whose candidates' texts cannot be
        read is degraded (its candidates could not be checked)."""
        syntax = plan.syntax
        if syntax is None:
            return dict(outcomes), {}, frozenset()
        ids = list(dict.fromkeys(h.chunk_id for o in outcomes.values() for h in o.hits or ()))
        resolved = dict(outcomes)
        if not ids:
            return resolved, {}, frozenset()
        try:
            texts = await self._store.texts(
                ids, tenant_id=plan.tenant_id, timeout=max(budget.remaining_s(), plan.budget_s)
            )
        except BackendError as exc:
            return (
                {
                    leg: _degraded(o, exc) if o.hits is not None else o
                    for leg, o in outcomes.items()
                },
                {},
                frozenset(),
            )
        # Reading hundreds of texts is CPU work: off the event loop.
        admitted = await anyio.to_thread.run_sync(
            lambda: {i for i, text in texts.items() if syntax.admits(text)}
        )
        filled = frozenset(
            leg for leg, o in outcomes.items() if o.hits is not None and len(o.hits) >= plan.fetched
        )
        for leg, outcome in outcomes.items():
            if outcome.hits is not None:
                kept = [h for h in outcome.hits if h.chunk_id in admitted][: plan.candidates]
                resolved[leg] = _with_hits(outcome, kept)
        return resolved, texts, filled

    async def count_matches(self, request: LegRequest, matches: MatchRequest) -> Matches | None:
        """The keyword matches of a sparse leg's request, or ``None`` (logged) when the
        store fails or misses the deadline: totals then fall back to the window."""
        vector = request.query.sparse
        if vector is None:
            msg = "keyword matches need the query's sparse weights"
            raise TypeError(msg)
        remaining = request.deadline - time.perf_counter()
        if remaining <= 0:
            return None
        try:
            hits = await asyncio.wait_for(
                self._store.match_sparse(
                    vector,
                    tenant_id=request.query.tenant_id,
                    filter=request.query.filter,
                    limit=matches.limit,
                    fields=matches.fields,
                    timeout=remaining,
                ),
                remaining + DEADLINE_MARGIN_S,
            )
        except (TimeoutError, BackendError) as exc:
            logger.warning("search.count.failed error=%s: %s", type(exc).__name__, exc)
            return None
        return Matches(tuple(hits), matches.limit)

    async def _first_terms(
        self, tenant_id: str, chunk_id: str, *, deadline: float
    ) -> frozenset[int] | None:
        """The stored terms of ``chunk_id`` (:meth:`VectorStore.sparse_terms`) by
        ``deadline`` (a :func:`time.perf_counter` instant), as a leg is held to it;
        ``None``, logged, when the store fails or misses it, or the chunk is gone."""
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return None
        try:
            terms = await asyncio.wait_for(
                self._store.sparse_terms([chunk_id], tenant_id=tenant_id, timeout=remaining),
                remaining + DEADLINE_MARGIN_S,
            )
        except (TimeoutError, BackendError) as exc:
            late = f"no answer within {remaining:.3f}s"
            detail = exc.message if isinstance(exc, BackendError) else late
            logger.warning(
                "search.coverage.unavailable tenant=%s error=%s: %s",
                tenant_id,
                type(exc).__name__,
                detail,
            )
            return None
        return terms.get(chunk_id)

    async def _leg_then_matches(
        self,
        request: LegRequest,
        matches: MatchRequest | None,
        terms: dict[str, frozenset[int] | None] | None = None,
    ) -> tuple[LegOutcome, Matches | None]:
        """The leg, then with ``matches`` its keyword matches if it filled its window
        (else it returned them all, and counting them again would be wasted work), and
        with ``terms`` the stored terms of its first candidate, added to ``terms`` (``None``
        when the read failed: it is not tried again); the two reads run together."""
        outcome = await self.run_leg(request)
        hits = outcome.hits
        if not hits:
            return outcome, None

        async def count() -> Matches | None:
            if matches is None or len(hits) < request.query.limit:
                return None
            return await self.count_matches(request, matches)

        async def read() -> None:
            if terms is not None:
                first = hits[0].chunk_id
                tenant = request.query.tenant_id
                terms[first] = await self._first_terms(tenant, first, deadline=request.deadline)

        counted, _ = await asyncio.gather(count(), read())
        return outcome, counted

    async def _round(
        self,
        plan: SearchPlan,
        *,
        legs: Sequence[str],
        budget: Budget,
        clock: StageClock,
        vectors: QueryVectors,
        matches: MatchRequest | None = None,
        encoded: list[bool] | None = None,
        earlier: Mapping[str, tuple[StoredHit, ...]] | None = None,
        terms: dict[str, frozenset[int] | None] | None = None,
    ) -> tuple[dict[str, LegOutcome], Matches | None, QueryVectors]:
        now = time.perf_counter()
        counted: Matches | None = None
        if budget.spent(now=now):
            # No time left to encode or search: the legs missed the deadline.
            outcomes = [_failed(leg, LegStatus.TIMEOUT, _NO_TIME_LEFT, started=now) for leg in legs]
            clock.lap(Stage.RETRIEVAL)
            return {o.leg: o for o in outcomes}, None, vectors
        needs = {need for leg in legs for need in self._sources[leg].needs}
        vectors = await self.encode(
            plan, needs=needs, clock=clock, budget=budget, known=vectors, encoded=encoded
        )
        runnable: list[LegRequest] = []
        failed: list[LegOutcome] = []
        for leg in legs:
            wanted = self._sources[leg].needs
            missing = vectors.missing(wanted)
            if missing is not None:
                failed.append(_failed(leg, missing.status, missing.error, started=now))
                continue
            query = SourceQuery(
                tenant_id=plan.tenant_id,
                text=plan.text,
                filter=plan.filter,
                limit=plan.fetched,
                dense=vectors.dense if Need.DENSE in wanted else None,
                sparse=vectors.sparse if Need.SPARSE in wanted else None,
                earlier=dict(earlier or {}) if Need.HITS in wanted else {},
                params=plan.params_of(leg),
            )
            runnable.append(LegRequest(leg, query, budget.deadline))
        results = await asyncio.gather(
            *(
                self._leg_then_matches(r, matches, terms)
                if r.leg == Leg.SPARSE.value
                else self._leg_then_matches(r, None)
                for r in runnable
            )
        )
        outcomes = [outcome for outcome, _ in results] + failed
        counted = next((m for _, m in results if m is not None), None)
        clock.lap(Stage.RETRIEVAL)
        return {o.leg: o for o in outcomes}, counted, vectors

    async def _resolve(
        self,
        plan: SearchPlan,
        outcomes: Mapping[str, LegOutcome],
        *,
        vectors: QueryVectors,
        budget: Budget,
    ) -> dict[str, LegOutcome]:
        """Every answered leg's candidates as chunks with their fields (the module
        docstring): bare chunk ids read by id, documents brought to their best chunk. A
        leg whose candidates cannot be read (the store failing) is degraded."""
        resolved = dict(outcomes)
        bare: dict[str, list[str]] = {}
        documents: dict[str, list[str]] = {}
        for leg, outcome in outcomes.items():
            if outcome.hits is None:
                continue
            if self._sources[leg].level is Level.DOCUMENT:
                documents[leg] = [h.chunk_id for h in outcome.hits]
            elif any("document_id" not in h.fields for h in outcome.hits):
                bare[leg] = [h.chunk_id for h in outcome.hits if "document_id" not in h.fields]
        if not bare and not documents:
            return resolved
        for leg, ids in bare.items():
            outcome = outcomes[leg]
            try:
                fields = await self._store.chunk_fields(
                    ids, tenant_id=plan.tenant_id, timeout=max(budget.remaining_s(), 0.001)
                )
            except BackendError as exc:
                resolved[leg] = _degraded(outcome, exc)
                continue
            hits = []
            for hit in outcome.hits or ():
                if "document_id" in hit.fields:
                    hits.append(hit)
                elif hit.chunk_id in fields and passes(plan.filter, fields[hit.chunk_id]):
                    hits.append(StoredHit(hit.chunk_id, hit.score, fields[hit.chunk_id]))
            resolved[leg] = _with_hits(outcome, hits)
        if documents:
            known = _best_known_chunks([o for leg, o in resolved.items() if leg not in documents])
            for leg, ids in documents.items():
                resolved[leg] = await self._documents_to_chunks(
                    plan, outcomes[leg], ids, known=known, vectors=vectors, budget=budget
                )
        return resolved

    async def _documents_to_chunks(
        self,
        plan: SearchPlan,
        outcome: LegOutcome,
        document_ids: Sequence[str],
        *,
        known: Mapping[str, StoredHit],
        vectors: QueryVectors,
        budget: Budget,
    ) -> LegOutcome:
        """A document-level leg's candidates, each as its document's best chunk, with
        the leg's own score; a document with no chunk under the filter is dropped."""
        unknown = [d for d in dict.fromkeys(document_ids) if d not in known]
        found: dict[str, StoredHit] = {}
        if unknown:
            vector: DenseVector | SparseVector | None = (
                vectors.dense if vectors.dense is not None else vectors.sparse
            )
            try:
                found = await self._store.best_chunks(
                    unknown,
                    tenant_id=plan.tenant_id,
                    filter=plan.filter,
                    vector=vector,
                    timeout=max(budget.remaining_s(), 0.001),
                )
            except BackendError as exc:
                return _degraded(outcome, exc)
        hits: list[StoredHit] = []
        seen: set[str] = set()
        for hit in outcome.hits or ():
            chunk = known.get(hit.chunk_id) or found.get(hit.chunk_id)
            if chunk is None or chunk.chunk_id in seen:
                continue
            seen.add(chunk.chunk_id)
            hits.append(StoredHit(chunk.chunk_id, hit.score, chunk.fields, hit.detail))
        return _with_hits(outcome, hits)


def _best_known_chunks(outcomes: Sequence[LegOutcome]) -> dict[str, StoredHit]:
    """Per document, the chunk of it the chunk-level legs ranked highest (the best
    rank any of them gave it; the earlier leg on a tie)."""
    best: dict[str, tuple[int, StoredHit]] = {}
    for outcome in outcomes:
        for rank, hit in enumerate(outcome.hits or ()):
            document = hit.fields.get("document_id")
            if document is None:
                continue
            kept = best.get(str(document))
            if kept is None or rank < kept[0]:
                best[str(document)] = (rank, hit)
    return {document: hit for document, (_, hit) in best.items()}


def _with_hits(outcome: LegOutcome, hits: Sequence[StoredHit]) -> LegOutcome:
    report = replace(outcome.report, candidates=len(hits))
    return LegOutcome(outcome.leg, tuple(hits), report)


def _degraded(outcome: LegOutcome, exc: BackendError) -> LegOutcome:
    status = LegStatus.TIMEOUT if isinstance(exc, VectorStoreTimeoutError) else LegStatus.ERROR
    error = f"its candidates could not be read ({type(exc).__name__}: {exc.message})"
    logger.warning("search.leg.degraded leg=%s status=%s error=%s", outcome.leg, status, error)
    report = replace(outcome.report, status=status, candidates=0, error=error)
    return LegOutcome(outcome.leg, None, report)


def _skipped(leg: str) -> LegOutcome:
    return LegOutcome(leg, None, LegReport(leg, LegStatus.SKIPPED, 0.0, 0))


def _failed(leg: str, status: LegStatus, error: str, *, started: float) -> LegOutcome:
    took = (time.perf_counter() - started) * 1000
    logger.warning("search.leg.degraded leg=%s status=%s error=%s", leg, status, error)
    return LegOutcome(leg, None, LegReport(leg, status, took, 0, error))
