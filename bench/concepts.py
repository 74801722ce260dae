"""The Level 1 index's costs (docs/lazy.md): concept extraction's throughput, the
ingest slowdown it brings, and a tenant's concept index build time, on a JSONL corpus
(MuSiQue's by default).

* **extraction**: :class:`ConceptExtractor` over the first ``--chunks`` texts, once to
  load the pipelines (untimed), then timed: chunks per second;
* **ingest**: the first ``--documents`` documents submitted as one job and indexed by
  :meth:`IndexingService.process_job` (the worker's code; SQLite, the in-memory store,
  the ``--encoder``), once with ``concepts.enabled`` off and once on, each on a fresh
  database, after an untimed warm-up run of each; the slowdown is the ratio of the two
  wall times;
* **index**: the tenant's concept index built from the rows the second run wrote.

Usage (from the repository root)::

    python -m bench.concepts --json
    python -m bench.concepts --documents 300 --chunks 200 --encoder offline
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hsearch.concepts.extract import ConceptExtractor
from hsearch.config import ApiSettings, ConceptSettings, EncoderKind, EncoderSettings, Settings
from hsearch.db.migrate import upgrade_database
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.runtime import build_services
from hsearch.vectorstore.in_memory import InMemoryVectorStore

CORPUS = Path(__file__).resolve().parents[2] / "shared/datasets/en-musique-train-100/corpus.jsonl"
TENANT = "bench"


def read_corpus(path: Path, limit: int) -> list[dict[str, Any]]:
    out = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            out.append(json.loads(line))
            if len(out) == limit:
                break
    return out


def extraction(texts: Sequence[str]) -> float:
    extractor = ConceptExtractor()
    extractor.extract(texts[:8], lang="en")
    started = time.perf_counter()
    extractor.extract(texts, lang="en")
    return len(texts) / (time.perf_counter() - started)


def ingest(
    rows: Sequence[dict[str, Any]], *, enabled: bool, encoder: str, root: Path, name: str
) -> tuple[float, int, float | None]:
    """Seconds to index ``rows`` as one job; chunks; the concept index's build seconds."""
    data = root / name
    data.mkdir()
    upgrade_database(f"sqlite:///{data / 'hsearch.sqlite'}")
    settings = Settings(
        _env_file=None,
        data_dir=data,
        encoder=EncoderSettings(kind=EncoderKind(encoder)),
        api=ApiSettings(),
        concepts=ConceptSettings(enabled=enabled),
    )
    queue = InMemoryJobQueue()
    services = build_services(settings, store=InMemoryVectorStore(), queue=queue)
    try:
        services.tenancy.ensure_tenant(TENANT, actor="bench")
        documents = [
            DocumentInput(external_id=str(r["_id"]), text=r["text"], title=r.get("title", ""))
            for r in rows
        ]
        with unit_of_work(services.sessions, queue=queue) as uow:
            job = JobService(uow, settings=services.settings.ingest).submit(
                tenant_id=TENANT, documents=documents
            )
        started = time.perf_counter()
        indexer = services.indexing()
        status = indexer.process_job(job.id)
        while status == "running":  # a turn ended (ingest.batches_per_task): the next one
            status = indexer.process_job(job.id)
        seconds = time.perf_counter() - started
        if status != "succeeded":
            raise SystemExit(f"the job ended {status}")
        chunks = services.store.count(tenant_id=TENANT)
        build_s = None
        if enabled and services.concepts is not None:
            index = asyncio.run(services.concepts.current(TENANT, timeout=600))
            build_s = index.build_s
        return seconds, chunks, build_s
    finally:
        services.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--chunks", type=int, default=200, help="texts for the extraction")
    parser.add_argument("--documents", type=int, default=300, help="documents ingested")
    parser.add_argument("--encoder", default="offline", help="offline, fake or bge-m3")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    rows = read_corpus(args.corpus, max(args.chunks, args.documents))
    rate = extraction([r["text"] for r in rows[: args.chunks]])
    print(f"extraction: {rate:.1f} chunks/s", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ingest(rows[:20], enabled=True, encoder=args.encoder, root=root, name="warm-on")
        ingest(rows[:20], enabled=False, encoder=args.encoder, root=root, name="warm-off")
        off, chunks, _ = ingest(
            rows[: args.documents], enabled=False, encoder=args.encoder, root=root, name="off"
        )
        on, _, build_s = ingest(
            rows[: args.documents], enabled=True, encoder=args.encoder, root=root, name="on"
        )
    result = {
        "extraction_chunks_per_s": round(rate, 1),
        "documents": args.documents,
        "chunks": chunks,
        "encoder": args.encoder,
        "ingest_s_without_concepts": round(off, 2),
        "ingest_s_with_concepts": round(on, 2),
        "slowdown": round(on / off, 3),
        "index_build_s": None if build_s is None else round(build_s, 3),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
