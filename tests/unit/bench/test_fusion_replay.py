"""The fusion replay reproduces the service's hybrid ranking from recorded legs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.datasets import Dataset
from bench.fusion_replay import Replay, evaluate, main, read_legs
from bench.report import TOP_K
from bench.runner import leg_candidates, leg_record
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import EncoderKind, IngestSettings, SearchSettings
from hsearch.embedding.factory import ENCODER_FUSION
from hsearch.embedding.fake import FakeEmbedder
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.chunking import Chunker
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.ingestion.worker.indexer import IndexingService
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.search.models import SearchQuery
from hsearch.search.service import SearchService
from hsearch.types import SearchMode
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.budget import UNHURRIED

TENANT = "t"
TEXTS = {
    "rivers": "Rivers flow into the sea and carry water from the mountains.",
    "sea": "The sea is salty; rivers bring fresh water to it.",
    "mountains": "Mountains rise high above the valleys and the rivers below.",
    "tokyo": "東京は日本の首都です。",
    "kyoto": "京都は古い都です。川が流れる。",
    "forest": "A forest of tall trees near the mountains.",
}
QUERIES = {
    "q1": "rivers and the sea",
    "q2": "mountains",
    "q3": "日本の首都",
    "q4": "trees",
    "q5": "salty rivers near a volcano",  # no chunk holds every word
}
# Balanced prior weights: the hybrid order then differs from both legs' orders.
SETTINGS = SearchSettings(
    fusion="adaptive", adaptive_weights={"dense": 0.5, "sparse": 0.5}, **UNHURRIED
)
QRELS = {
    "q1": {"rivers": 1.0},
    "q2": {"mountains": 2.0},
    "q3": {"tokyo": 1.0},
    "q4": {"x": 1.0},
    "q5": {"sea": 1.0},
}


async def record_legs(
    sessions: sessionmaker[Session], path: Path, settings: SearchSettings = SETTINGS
) -> dict[str, list[str]]:
    """Index TEXTS, search every query in all modes, write a --save-legs file; returns
    the service's own hybrid ranking (corpus ids) per query."""
    # A small dimension makes the hashed dense vectors noisy: the legs disagree.
    embedder, store = FakeEmbedder(dimension=4), InMemoryVectorStore()
    queue = InMemoryJobQueue()
    with unit_of_work(sessions, queue=queue) as uow:
        JobService(uow, settings=IngestSettings()).submit(
            tenant_id=TENANT,
            documents=[DocumentInput(external_id=k, title=k, text=v) for k, v in TEXTS.items()],
        )
    IndexingService(
        session_factory=sessions,
        embedder=embedder,
        store=store,
        statistics=LexicalStatistics(sessions),
        chunker=Chunker(embedder.tokenizer, max_tokens=96, overlap_tokens=0),
    ).process_job(queue.sent[0])
    service = SearchService(
        embedder=embedder, store=store, statistics=LexicalStatistics(sessions), settings=settings
    )
    dataset = Dataset(name="tiny", corpus=[], queries=QUERIES, qrels=QRELS)
    hybrid: dict[str, list[str]] = {}
    with path.open("w", encoding="utf-8") as out:
        for qid, text in QUERIES.items():
            legs = {}
            coverage = None
            for mode, leg in (("semantic", "dense"), ("keyword", "sparse"), ("hybrid", "")):
                result = await service.search(
                    SearchQuery(
                        tenant_id=TENANT,
                        query=text,
                        top_k=TOP_K,
                        candidates=TOP_K,
                        mode=SearchMode(mode),
                    )
                )
                if leg:
                    legs[leg] = leg_candidates(result)
                    if leg == "sparse":
                        coverage = result.keyword_coverage
                else:
                    hybrid[qid] = [h.external_id for h in result.hits]
            record = leg_record(
                dataset,
                qid,
                legs,
                candidates=TOP_K,
                dense_scripts=embedder.info.dense_scripts,
                encoder="fake",
                keyword_coverage=coverage,
            )
            print(json.dumps(record, ensure_ascii=False), file=out)
    return hybrid


READING = SETTINGS.model_copy(update={"keyword_coverage": True, "length_words": 2})
"""Adaptive reading the keyword coverage and asking a clearer standout past 2 words."""


@pytest.mark.parametrize(
    "settings",
    [SETTINGS, SearchSettings(**UNHURRIED), READING],
    ids=["configured", "the encoder's default", "reading the query"],
)
async def test_replay_reproduces_the_service_ranking(
    sessions: sessionmaker[Session], tmp_path: Path, settings: SearchSettings
) -> None:
    path = tmp_path / "legs.jsonl"
    hybrid = await record_legs(sessions, path, settings)
    queries = list(read_legs(path))
    assert [q.query_id for q in queries] == list(QUERIES)
    replay = Replay(settings=settings)
    # The replay resolves the recording encoder's default as the service does.
    assert {q.encoder for q in queries} == {EncoderKind.FAKE}
    expected = settings.resolve_fusion(FakeEmbedder().info.fusion)
    assert all(replay.resolved(q) == expected for q in queries)
    for q in queries:
        assert len(q.legs["dense"]) == len(TEXTS)  # the whole candidate list was recorded
        assert replay.rank(q, "hybrid") == hybrid[q.query_id]
        assert replay.rank(q, "semantic") == [doc for _, doc, _ in q.legs["dense"]]
        assert replay.rank(q, "keyword") == [doc for _, doc, _ in q.legs["sparse"]]
    # Hybrid really differs from both legs somewhere, or the comparison proves little.
    assert any(
        hybrid[q.query_id] not in (replay.rank(q, "semantic"), replay.rank(q, "keyword"))
        for q in queries
    )
    # The japanese query: the fake encoder declares no scripts, so dense keeps its weight.
    assert queries[2].dense_scripts is None
    coverage = [q.keyword_coverage for q in queries if q.legs.get("sparse")]
    if settings.keyword_coverage:
        assert all(c is not None for c in coverage)
        assert len(set(coverage)) > 1, "the queries' coverages differ"
    else:
        assert coverage == [None] * len(coverage)


async def test_the_replay_of_a_reading_differs_from_the_scores_alone(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    path = tmp_path / "legs.jsonl"
    hybrid = await record_legs(sessions, path, READING)
    queries = list(read_legs(path))
    plain = Replay(settings=SETTINGS)
    assert any(plain.rank(q, "hybrid") != hybrid[q.query_id] for q in queries)


async def test_replay_scores_like_the_benchmark(
    sessions: sessionmaker[Session], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "legs.jsonl"
    await record_legs(sessions, path)
    (result,) = evaluate(list(read_legs(path)), Replay(settings=SETTINGS))
    assert result["dataset"] == "tiny"
    assert result["queries"] == len(QUERIES)
    assert set(result["modes"]) == {"semantic", "keyword", "hybrid"}
    # q4's only relevant id is in no leg: every mode scores 0 on it, so no mean reaches 1.
    assert all(0.0 <= m["ndcg@10"] < 1.0 for m in result["modes"].values())
    assert result["fuse_ms_mean"] > 0, "the time of the hybrid fuse() calls"
    counts = result["per_query_vs_best_leg"]
    assert sum(counts.values()) == len(QUERIES)
    assert counts["same"] >= 1, "q4 scores 0 in every mode"

    assert main([str(path), "--json", "--fusion", "score", "--by-prefix"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["fusion"] == "score"
    assert printed["by_prefix"][""]["queries"] == len(QUERIES)
    assert main([str(path)]) == 0
    assert "tiny" in capsys.readouterr().out


def test_the_encoder_and_the_overrides_resolve_like_a_request(tmp_path: Path) -> None:
    path = tmp_path / "legs.jsonl"
    row = {
        "dataset": "d",
        "query_id": "1",
        "query": "x",
        "qrels": {"a": 1},
        "candidates": 2,
        "dense_scripts": None,
        "legs": {"dense": [["c1", "a", 0.9]], "sparse": [["c2", "b", 3.0]]},
    }
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    (q,) = read_legs(path)
    assert q.encoder is EncoderKind.OFFLINE, "files without the field: the offline encoder"
    settings = SearchSettings()
    assert Replay(settings=settings).resolved(q) == ENCODER_FUSION[EncoderKind.OFFLINE]
    bge = ENCODER_FUSION[EncoderKind.BGE_M3]
    assert Replay(settings=settings, encoder=bge).resolved(q) == bge
    # --fusion, --weights and --k override as a request's fusion, weights and rrf_k do
    replay = Replay(settings=settings, fusion="rrf", weights={"dense": 0.6, "sparse": 0.4}, k=20)
    assert replay.resolved(q).describe() == "rrf dense=0.6,sparse=0.4 k=20"
    (result,) = evaluate([q], replay, modes=("hybrid",))
    assert set(result["modes"]) == {"hybrid"}
    assert result["fusion_setting"] == "rrf dense=0.6,sparse=0.4 k=20"
    assert "per_query_vs_best_leg" not in result, "no single-leg modes, no comparison"


def test_bad_weights_are_refused_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "legs.jsonl"
    path.write_text("", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        main([str(path), "--weights", "dense"])
    assert exit_info.value.code == 2
    assert "--weights" in capsys.readouterr().err
