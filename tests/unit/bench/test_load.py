"""The load test's pure parts: how a response is classified, the summary of a run, the
memory growth verdict, the limits it sets and the keys of its JSON result."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
from bench import load
from bench.load import (
    Corpus,
    Ingest,
    Outcome,
    Sample,
    classify,
    markdown,
    rate_limit_for,
    rss_growth,
    summarize,
    targets_met,
    window_rates,
)

OK_BODY: dict[str, Any] = {"cached": False, "degraded": [], "hits": []}


def test_classify_names_each_kind_of_answer() -> None:
    assert classify(200, OK_BODY) is Outcome.OK
    assert classify(200, {**OK_BODY, "cached": True}) is Outcome.OK
    assert classify(200, {**OK_BODY, "degraded": ["sparse"]}) is Outcome.DEGRADED
    assert classify(429, {"error": "rate_limited"}) is Outcome.RATE_LIMITED
    assert classify(503, {"error": "overloaded"}) is Outcome.UNAVAILABLE
    assert classify(503, None) is Outcome.UNAVAILABLE
    # Anything else is an error: another status, no answer, a body that is not a search's.
    assert classify(500, {"error": "internal"}) is Outcome.ERROR
    assert classify(401, None) is Outcome.ERROR
    assert classify(None, None) is Outcome.ERROR
    assert classify(200, None) is Outcome.ERROR
    assert classify(200, {"hits": []}) is Outcome.ERROR


def test_window_rates_count_completions_per_whole_window() -> None:
    ends = [0.5] * 30 + [31.0] * 60 + [65.0] * 3  # the last, partial window is left out
    assert window_rates(ends, duration=70.0, window=30.0) == [1.0, 2.0]
    # A run shorter than one window is one window of its own length.
    assert window_rates([1.0, 2.0, 3.0, 9.9], duration=10.0, window=30.0) == [0.4]
    assert window_rates([], duration=0.0) == []


def _sample(at: float, ms: float, outcome: Outcome = Outcome.OK, *, cached: bool = False) -> Sample:
    return Sample(at=at, seconds=ms / 1000, outcome=outcome, cached=cached, hot=cached)


def test_summary_counts_outcomes_apart_and_times_only_answers() -> None:
    samples = [_sample(i * 0.1, float(i), cached=i % 4 == 0) for i in range(1, 101)]
    samples += [
        _sample(5.0, 5000.0, Outcome.ERROR),
        _sample(5.0, 1.0, Outcome.RATE_LIMITED),
        _sample(5.0, 1.0, Outcome.RATE_LIMITED),
        _sample(5.0, 2.0, Outcome.UNAVAILABLE),
        _sample(6.0, 100.0, Outcome.DEGRADED),
    ]
    out = summarize(samples, duration=10.0)
    assert out["requests"] == 105
    assert out["searches"] == 101  # 100 OK and the degraded one: answered
    assert out["searches_per_s"] == 10.1
    assert (out["errors"], out["rate_limited_429"], out["unavailable_503"]) == (1, 2, 1)
    assert out["degraded"] == 1
    # 1..100 ms and the degraded 100 ms; the failed 5 s request is not a latency.
    assert out["latency_ms"]["p50"] == 51.0
    assert out["latency_ms"]["max"] == 100.0
    assert out["latency_ms"]["p99"] == pytest.approx(100.0)
    cache = out["cache"]
    assert (cache["hits"], cache["misses"]) == (25, 76)
    assert cache["hit_ratio"] == round(25 / 101, 3)
    assert cache["hit_p50_ms"] == 52.0  # 4, 8, ..., 100


def test_summary_of_nothing_answered_has_no_latency() -> None:
    out = summarize([_sample(1.0, 3.0, Outcome.UNAVAILABLE)], duration=5.0)
    assert out["searches"] == 0
    assert out["latency_ms"]["p50"] is None
    assert out["cache"]["hit_ratio"] is None
    assert out["unavailable_503"] == 1


def test_rss_growth_holds_every_counted_process_to_the_target() -> None:
    mib = 2**20
    warm = {"api worker (pid 1)": 200 * mib, "milvus main (pid 2)": 300 * mib}
    within = {"api worker (pid 1)": 210 * mib, "milvus main (pid 2)": 329 * mib}
    out = rss_growth(warm, within)
    assert out["met"] is True
    assert out["max_ratio"] == pytest.approx(329 / 300, abs=1e-3)
    assert out["processes"]["api worker (pid 1)"] == {
        "warm_mb": 200.0,
        "end_mb": 210.0,
        "ratio": 1.05,
        "held_to_target": True,
    }
    grown = {**within, "milvus main (pid 2)": 340 * mib}  # 13 % more
    assert rss_growth(warm, grown)["met"] is False
    # A role outside the target is reported, not held to it.
    with_redis = {**warm, "redis main (pid 3)": 10 * mib}
    redis_grown = {**within, "redis main (pid 3)": 50 * mib}
    out = rss_growth(with_redis, redis_grown, outside_target=("redis",))
    assert out["met"] is True
    assert out["processes"]["redis main (pid 3)"]["ratio"] == 5.0
    assert out["processes"]["redis main (pid 3)"]["held_to_target"] is False
    assert rss_growth(with_redis, redis_grown)["met"] is False
    # A process that vanished (or was replaced) cannot be judged: the target is missed.
    replaced = {"api worker (pid 9)": 200 * mib, "milvus main (pid 2)": 300 * mib}
    out = rss_growth(warm, replaced)
    assert out["met"] is False
    assert out["processes"]["api worker (pid 1)"]["end_mb"] is None


def test_rate_limit_is_far_above_what_the_clients_can_send() -> None:
    limit = rate_limit_for(clients=40, think_s=0.01)
    match = re.fullmatch(r"(\d+)/second", limit)
    assert match is not None
    count = int(match.group(1))
    # 40 clients at the shortest think time (5 ms), all on one key: 8,000/s.
    assert count >= 10 * 8000
    assert rate_limit_for(clients=1, think_s=10.0) == "1000/second"  # never below 1000/s
    assert rate_limit_for(clients=1, think_s=0.0) == "10000/second"  # no think time


def test_corpus_is_reproducible_and_revisions_change_the_text() -> None:
    corpus = Corpus(3)
    assert len(set(corpus.words)) == load.VOCABULARY
    first = corpus.document("load0", 5, revision=0)
    assert first == Corpus(3).document("load0", 5, revision=0)
    again = corpus.document("load0", 5, revision=1)
    assert again["external_id"] == first["external_id"] == "doc-5"
    assert again["text"] != first["text"]
    low, high = load.WORDS_PER_DOCUMENT
    assert low <= len(first["text"].split()) <= high
    query = corpus.query(random.Random(1))
    assert load.WORDS_PER_QUERY[0] <= len(query.split()) <= load.WORDS_PER_QUERY[1]


def _result() -> dict[str, Any]:
    search = summarize([_sample(1.0, 10.0), _sample(2.0, 20.0, cached=True)], duration=4.0)
    mib = 2**20
    rss = rss_growth({"api worker (pid 1)": 100 * mib}, {"api worker (pid 1)": 101 * mib})
    return {
        "benchmark": "load",
        "duration_s": 4.0,
        "warmup_s": 1.0,
        "offered": {"clients": 2, "think_ms": 200.0, "tenants": 4, "hot_share": 0.5},
        "stack": {"api_workers": 2},
        "search": search,
        "ingest": Ingest(submitted=2, documents=20).report(duration=4.0),
        "rss": rss,
        "load_average_before": [1.0, 1.0, 1.0],
        "load_average_after": [1.5, 1.0, 1.0],
        "met": targets_met(search, rss),
        "machine": {"cpus": 2},
    }


def test_result_keys_and_the_table() -> None:
    result = _result()
    assert json.loads(json.dumps(result)) == result  # plain JSON
    assert set(result["search"]) >= {
        "searches_per_s",
        "latency_ms",
        "errors",
        "rate_limited_429",
        "unavailable_503",
        "degraded",
        "cache",
    }
    assert set(result["search"]["latency_ms"]) >= {"p50", "p95", "p99"}
    assert set(result["ingest"]) >= {"jobs_submitted", "documents_per_s", "jobs_finished"}
    assert result["met"] == {
        "errors": True,
        "rate_limited_429": True,
        "unavailable_503": True,
        "degraded": True,
        "rss_within_10pct": True,
    }
    table = markdown(result)
    assert "| 0.5 | 15.0 |" in table  # searches/s, then p50
    assert "| api worker (pid 1) | 100.0 | 101.0 | 1.01 |" in table


def test_targets_fail_on_any_refusal_or_growth() -> None:
    result = _result()
    search, rss = result["search"], result["rss"]
    assert all(targets_met(search, rss).values())
    for key in ("errors", "rate_limited_429", "unavailable_503", "degraded"):
        assert targets_met({**search, key: 1}, rss)[key] is False
    assert targets_met(search, {**rss, "met": False})["rss_within_10pct"] is False
