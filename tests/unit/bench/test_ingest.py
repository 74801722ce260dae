"""The ingest throughput benchmark on the in-memory store and the fake encoder: the shape
of its result and its check that no batch is encoded twice (no timing is asserted)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from bench.ingest import (
    Config,
    CountingEmbedder,
    EncodedTwiceError,
    InMemoryTarget,
    PassThroughEmbedder,
    SQLiteDatabases,
    Stack,
    check_encoded_once,
    main,
    run,
    run_pipeline,
    summary,
)

from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedder, Embedding, EncoderInfo, SparseKind, Tokenizer
from hsearch.errors import EncoderError
from hsearch.ingestion.models import DocumentInput
from hsearch.types import SparseVector

LONG = " ".join(f"Sentence {i} of a longer abstract about rivers and floods." for i in range(40))
DOCUMENTS = [
    DocumentInput(external_id=f"d{i}", title=f"Title {i}", text=text)
    for i, text in enumerate(
        [
            "Rivers flow to the sea.",
            "Storms at sea tonight.",
            LONG,  # several chunks
            "Mountains rise high above the valley.",
            "Floods in the valley after the storm.",
        ]
    )
]


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several decide batches and encode groups even for five documents."""
    monkeypatch.setenv("HSEARCH_INGEST__BATCH_DOCUMENTS", "2")
    monkeypatch.setenv("HSEARCH_INGEST__BATCH_CHUNKS", "3")
    monkeypatch.setenv("HSEARCH_INGEST__CHUNK_MAX_TOKENS", "40")
    monkeypatch.setenv("HSEARCH_INGEST__CHUNK_OVERLAP_TOKENS", "0")


def test_the_result_holds_both_comparisons_with_their_targets(tmp_path: Path) -> None:
    result = run(
        DOCUMENTS,
        Config(repeats=3, end_to_end_repeats=2, dimension=16, end_to_end_documents=4),
        root=tmp_path,
        target=InMemoryTarget(),
        encoder=FakeEmbedder,
        dataset="tiny",
    )
    assert json.loads(json.dumps(result)) == result  # what --json prints
    assert result["settings"]["batch_chunks"] == 3
    assert result["settings"]["pass_through"] == {"dimension": 16, "sparse_kind": "term_frequency"}
    write, end = result["write"], result["end_to_end"]
    assert (write["documents"], end["documents"]) == (5, 4)
    assert write["chunks"] > end["chunks"] > 4  # the long document has several
    # Groups of at most 3 chunks, the long document a group of its own, encoded 3 chunks
    # at a time (its job reports its progress between them): more calls than upserts.
    assert write["encode_calls"] > write["upserts"] > 2
    assert (write["target"], end["target"]) == (0.8, 0.9)
    comparisons = (
        (write, ("raw_insert", "raw_insert_columns", "pipeline"), 3),
        (end, ("encoder_alone", "pipeline"), 2),
    )
    for part, sides, repeats in comparisons:
        assert isinstance(part["pass"], bool)
        assert part["pass"] == (part["ratio"]["median"] >= part["target"])
        assert len(part["ratio"]["per_repeat"]) == repeats
        assert part["ratio"]["min"] <= part["ratio"]["median"] <= part["ratio"]["max"]
        for side in sides:
            assert len(part[side]["runs"]) == repeats
            rates = part[side]["rows_per_s"]
            assert 0 < rates["min"] <= rates["median"] <= rates["max"]
    # Every pipeline run encoded each chunk once, in the first pass's batches; the
    # encoder alone encoded the same texts in the same batches.
    for part in (write, end):
        once = {"calls": part["encode_calls"], "texts": part["chunks"]}
        for run_row in part["pipeline"]["runs"]:
            assert run_row["chunks"] == part["chunks"]
            assert run_row["encode"] == once
    for alone in end["encoder_alone"]["runs"]:
        assert alone["encode"] == {"calls": end["encode_calls"], "texts": end["chunks"]}
    for side in ("raw_insert", "raw_insert_columns"):
        assert all(r["rows"] == write["chunks"] for r in write[side]["runs"])
    assert write["pass_columns"] == (write["ratio_columns"]["median"] >= write["target"])
    assert len(write["ratio_columns"]["per_repeat"]) == 3
    # Each thread's CPU time: some, and never more than the wall time it was taken over.
    cpu, wall = write["cpu_ms_per_chunk"], write["ms_per_chunk"]
    assert 0 < cpu["raw_insert_client"] <= wall["raw_insert"] + 1e-3
    assert 0 < cpu["raw_insert_columns_client"] <= wall["raw_insert_columns"] + 1e-3
    assert 0 < cpu["pipeline_indexing_thread"] <= wall["pipeline"] + 1e-3
    assert 0 < cpu["pipeline_store_client"] <= wall["pipeline_store_upsert"] + 1e-3
    for run_row in write["pipeline"]["runs"]:
        assert 0 < run_row["indexing_cpu_seconds"] <= run_row["seconds"] + 1e-4
    share = end["encoder_share"]
    assert 0 < share["min"] <= share["median"] <= share["max"] < 1
    assert len(share["per_repeat"]) == 2
    assert end["encoder"] == FakeEmbedder().info.fingerprint
    text = summary(result)
    assert "write path" in text
    assert "CPU ms per chunk" in text
    assert "against raw inserts of columns" in text
    assert "end to end" in text


class FirstBatchFails:
    """The fake encoder, except that its first call with more than one text fails: the
    indexer then encodes the group's documents one by one, a second time."""

    def __init__(self) -> None:
        self._inner = FakeEmbedder()
        self._failed = False

    @property
    def info(self) -> EncoderInfo:
        return self._inner.info

    @property
    def tokenizer(self) -> Tokenizer:
        return self._inner.tokenizer

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        if len(texts) > 1 and not self._failed:
            self._failed = True
            raise EncoderError("out of memory")
        return self._inner.embed_documents(texts, langs=langs)

    def embed_query(self, text: str, *, dense: bool = True, sparse: bool = True) -> Embedding:
        return self._inner.embed_query(text, dense=dense, sparse=sparse)

    def embed_queries(
        self, texts: Sequence[str], *, dense: bool = True, sparse: bool = True
    ) -> list[Embedding]:
        return self._inner.embed_queries(texts, dense=dense, sparse=sparse)

    def embed_query_without_model(self, text: str) -> SparseVector | None:
        return self._inner.embed_query_without_model(text)


def stack(tmp_path: Path) -> Stack:
    return Stack(root=tmp_path, databases=SQLiteDatabases(tmp_path), target=InMemoryTarget())


def test_the_command_measures_the_pipelines_own_work_on_the_in_memory_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --store memory: no Milvus Lite server; the pipeline's rate is that of its own work.
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": d.external_id, "title": d.title, "text": d.text}) + "\n"
            for d in DOCUMENTS
        )
    )
    (corpus / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "rivers"}) + "\n")
    (corpus / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td0\t1\n")
    argv = ["--dataset", str(corpus), "--documents", "5", "--repeats", "1"]
    assert main([*argv, "--store", "memory", "--parts", "write", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["settings"]["store"] == "in-memory store"
    assert result["write"]["chunks"] > len(DOCUMENTS)  # the long one is cut
    assert result["write"]["pipeline"]["rows_per_s"]["median"] > 0
    assert "end_to_end" not in result


def test_a_batch_encoded_twice_is_caught(tmp_path: Path) -> None:
    runs = stack(tmp_path)
    first = run_pipeline(runs, FakeEmbedder(), DOCUMENTS)
    batches = first.counter.batch_sizes
    check_encoded_once(first.counter, chunks=first.chunks, batches=batches)

    again = run_pipeline(runs, FirstBatchFails(), DOCUMENTS)
    assert again.chunks == first.chunks  # indexed all the same
    with pytest.raises(EncodedTwiceError, match=r"encoded \d+ texts in \d+ calls"):
        check_encoded_once(again.counter, chunks=again.chunks, batches=batches)


def test_other_batches_are_caught_too(tmp_path: Path) -> None:
    # The right number of texts, in other batches than the encoder-alone side replays.
    counter = CountingEmbedder(FakeEmbedder())
    counter.embed_documents(["a", "b", "c"])
    check_encoded_once(counter, chunks=3, batches=[3])
    with pytest.raises(EncodedTwiceError):
        check_encoded_once(counter, chunks=3, batches=[2, 1])


def test_the_pass_through_encoder_computes_nothing_once_filled(tmp_path: Path) -> None:
    info = EncoderInfo(
        name="pass-through", dimension=8, version="1", sparse_kind=SparseKind.TERM_FREQUENCY
    )
    encoder: Embedder = PassThroughEmbedder(info)
    made = encoder.embed_documents(["Rivers flow.", "Storms."])
    assert isinstance(encoder, PassThroughEmbedder)
    encoder.filling = False
    assert encoder.embed_documents(["Storms.", "Rivers flow."]) == [made[1], made[0]]
    assert len(made[0].dense) == 8
    assert made[0].sparse.values == (1.0, 1.0)  # the analyzer's counts: river, flow
    with pytest.raises(RuntimeError, match="no vector made"):
        encoder.embed_documents(["Mountains."])
