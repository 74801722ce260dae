"""Hypothesis fuzzes what a search takes from its caller, the query text (any Unicode,
empty, blank, control characters, lone surrogates, huge) and the filter (generated
trees, JSON of any shape, nesting past the limit), through the planner and the whole
service (SQLite, the fake encoder, the in-memory store holding a small corpus): a search
answers, or is refused with a 4xx that names the field. Never anything else, which the
API would answer with a 500.

The same through the API (JSON in, status out) is tests/unit/api/test_fuzz_openapi.py's
and test_fuzz_search_api below. Bounded: a few hundred examples in all, derandomized."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.migrate import upgrade_database
from hsearch.errors import InvalidRequestError
from hsearch.search.models import SearchQuery
from hsearch.search.planner import MAX_QUERY_CHARS
from hsearch.search.service import SearchService
from hsearch.types import SearchMode
from hsearch.vectorstore.filters import MAX_DEPTH
from tests.unit.search.corpus import TENANT, build
from tests.unit.vectorstore.filter_strategies import filters, json_garbage

FIELD = re.compile(r"^(query|filter|top_k|offset|candidates|facets|weights|rrf_k|min_score)\b")

FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

any_character = st.characters(codec=None, exclude_categories=())
"""Every code point, lone surrogates and controls included."""

query_texts = st.one_of(
    st.text(any_character, max_size=64),
    st.just(""),
    st.text(" \t\r\n\x0b\x0c\u00a0\u2028\u3000", max_size=8),  # blank
    st.text(st.characters(max_codepoint=0x1F), max_size=16),  # control characters
    st.builds(
        lambda c, n: c * n,
        st.sampled_from(["a", "日", "\U0001f600", "a ", "\x00"]),
        st.integers(MAX_QUERY_CHARS - 2, MAX_QUERY_CHARS + 2),
    ),
    st.text(any_character, min_size=MAX_QUERY_CHARS, max_size=MAX_QUERY_CHARS + 8),
)


def nested(depth: int, op: str) -> dict[str, Any]:
    node: dict[str, Any] = {"source": {"eq": "x"}}
    for _ in range(depth):
        node = {"not": node} if op == "not" else {op: [node, {"lang": {"eq": "en"}}]}
    return node


deep_filters = st.builds(
    nested, st.integers(MAX_DEPTH - 2, MAX_DEPTH + 40), st.sampled_from(["and", "or", "not"])
)
any_filter = st.none() | filters | json_garbage | deep_filters


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchService]:
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('fuzz')) / 'meta.sqlite'}"
    upgrade_database(url)
    engine = create_db_engine(url)
    built, _ = build(create_session_factory(engine))
    yield built
    engine.dispose()


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    running = asyncio.new_event_loop()
    yield running
    running.close()


def search_or_refuse(
    service: SearchService, loop: asyncio.AbstractEventLoop, query: SearchQuery
) -> None:
    refusal: InvalidRequestError | None = None
    try:
        loop.run_until_complete(service.search(query))
    except InvalidRequestError as exc:
        refusal = exc
    if refusal is not None:
        assert 400 <= refusal.status_code < 500
        assert FIELD.match(refusal.message), refusal.message


@FUZZ
@given(text=query_texts, mode=st.sampled_from(SearchMode))
def test_any_query_text_is_searched_or_refused_naming_query(
    service: SearchService, loop: asyncio.AbstractEventLoop, text: str, mode: SearchMode
) -> None:
    search_or_refuse(service, loop, SearchQuery(tenant_id=TENANT, query=text, mode=mode))


@FUZZ
@given(filter=any_filter, text=st.sampled_from(["rivers", "東京", "x"]))
def test_any_filter_is_applied_or_refused_naming_filter(
    service: SearchService, loop: asyncio.AbstractEventLoop, filter: object, text: str
) -> None:
    query = SearchQuery(tenant_id=TENANT, query=text, filter=filter)
    search_or_refuse(service, loop, query)


@FUZZ
@given(
    top_k=st.integers(-5, 10_000),
    offset=st.integers(-5, 10_000),
    candidates=st.none() | st.integers(-5, 100_000),
)
def test_any_page_is_served_or_refused_naming_the_bound(
    service: SearchService,
    loop: asyncio.AbstractEventLoop,
    top_k: int,
    offset: int,
    candidates: int | None,
) -> None:
    query = SearchQuery(
        tenant_id=TENANT, query="rivers", top_k=top_k, offset=offset, candidates=candidates
    )
    search_or_refuse(service, loop, query)


def test_the_strategies_reach_both_outcomes(
    service: SearchService, loop: asyncio.AbstractEventLoop
) -> None:
    """The properties above are not vacuous: deep filters and long queries are refused,
    their neighbours within the limits are searched."""
    ok = loop.run_until_complete(
        service.search(
            SearchQuery(tenant_id=TENANT, query="rivers", filter=nested(MAX_DEPTH - 1, "and"))
        )
    )
    assert ok.query == "rivers"
    with pytest.raises(InvalidRequestError, match=r"^filter"):
        loop.run_until_complete(
            service.search(
                SearchQuery(tenant_id=TENANT, query="r", filter=nested(MAX_DEPTH + 1, "and"))
            )
        )
    with pytest.raises(InvalidRequestError, match=r"^query"):
        loop.run_until_complete(
            service.search(SearchQuery(tenant_id=TENANT, query="a" * (MAX_QUERY_CHARS + 1)))
        )
