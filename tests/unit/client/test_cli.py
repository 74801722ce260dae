"""``hsearch ingest``, ``jobs`` and ``documents`` against the real app over HTTP: progress
as plain lines when stdout is no terminal, a run interrupted by the API going away
resumes without sending again what was accepted, a lost state only costs time, and
failed documents make a non-zero exit with a summary."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import httpx
import pytest

from hsearch.config import IngestSettings, RateLimitSettings
from hsearch.db.migrate import upgrade_database
from hsearch.local.processes import free_port
from hsearch.tenancy.factory import open_tenancy
from hsearch.types import Scope
from tests.unit.api.conftest import api_settings
from tests.unit.client.conftest import POISON, Cli, cli_for, live_api
from tests.unit.client.documents import write, write_jsonl, write_pdf


def handbook(root: Path) -> Path:
    write(root / "intro.txt", "Volcanoes erupt where tectonic plates meet.")
    write(root / "rivers.md", "# Rivers\n\nRivers carve valleys over millions of years.\n")
    write(root / "sub" / "glaciers.html", "<title>Glaciers</title><p>Glaciers grind rock.</p>")
    write_pdf(root / "sub" / "deserts.pdf", ["Deserts get little rain."], title="Deserts")
    write(root / "sub" / "oceans.md", "Oceans cover most of the planet.\n")
    write(root / "notes.csv", "ignored,file")
    return root


def documents_of(jsonl: Path, count: int) -> Path:
    return write_jsonl(
        jsonl,
        [
            {"external_id": f"doc-{i}", "text": f"Document number {i} about rocks."}
            for i in range(count)
        ],
    )


def lines_of(text: str) -> list[str]:
    return text.splitlines()


def test_ingest_a_folder_and_wait_with_plain_progress_lines(cli: Cli, tmp_path: Path) -> None:
    folder = handbook(tmp_path / "handbook")
    result = cli("ingest", str(folder), "--wait")
    assert result.exit_code == 0, result.output
    out = lines_of(result.stdout)
    assert "\x1b" not in result.stdout  # no terminal: no bar, plain lines
    assert any(line.startswith("sent: ") for line in out), out
    assert any(line.startswith("indexing: 5/5 documents (100%), ") for line in out), out
    reads = (
        "a folder is read for .htm, .html, .markdown, .md, .pdf, .txt files (give a .jsonl or "
        ".json file by itself)"
    )
    assert out[-3:] == [
        "documents: 5 read, 5 sent in 2 jobs, 0 already accepted",
        f"passed over 1 file in the folders given (1 .csv): {folder / 'notes.csv'}; {reads}",
        "jobs: 2 finished: 5 indexed, 0 unchanged, 0 failed, 0 cancelled",
    ]
    assert cli.api.gate.uploads == [4, 1]

    listed = cli("documents", "list", "--source", "handbook")
    assert listed.exit_code == 0, listed.output
    ids = [line.split()[0] for line in lines_of(listed.stdout)[1:]]
    assert ids == [
        "intro.txt",
        "rivers.md",
        "sub/deserts.pdf",
        "sub/glaciers.html",
        "sub/oceans.md",
    ]
    shown = cli("documents", "show", "sub/deserts.pdf")
    assert "title: Deserts" in lines_of(shown.stdout)
    hits = httpx.post(
        f"{cli.api.url}/v1/search",
        json={"query": "glaciers grind rock"},
        headers={"Authorization": f"Bearer {cli.api.key}"},
    ).json()
    assert hits["hits"][0]["external_id"] == "sub/glaciers.html"

    (folder / "more.jsonl").write_text('{"external_id": "m", "text": "More."}\n')
    again = cli("ingest", str(folder), "--wait")
    assert again.exit_code == 0, again.output
    assert lines_of(again.stdout)[-2:] == [
        "documents: 5 read, 0 sent in 0 jobs, 5 already accepted",
        f"passed over 2 files in the folders given (1 .csv, 1 .jsonl): {folder / 'more.jsonl'}, "
        f"{folder / 'notes.csv'}; {reads}",
    ]
    assert cli.api.gate.uploads == [4, 1], "nothing is sent twice"


def test_an_interrupted_run_resumes_without_sending_accepted_documents(
    cli: Cli, tmp_path: Path
) -> None:
    source = documents_of(tmp_path / "docs.jsonl", 10)
    cli.api.gate.fail_after = 1  # the API goes away after the first upload
    stopped = cli("ingest", str(source), "--wait")
    assert stopped.exit_code == 2, stopped.output
    assert "ingest stopped: " in stopped.stderr
    assert "no answer after 1 tries (503" in stopped.stderr
    (job,) = [json.loads(line) for line in lines_of(cli("jobs", "list", "--json").stdout)]
    # Stopped at the ninth document, which sends the second batch (5 to 8): no API.
    assert lines_of(stopped.stdout)[-2:] == [
        "documents: 9 read, 4 sent in 1 jobs, 0 already accepted",
        # --wait was given: the command says to run it again, not to add the flag.
        f"jobs not waited for to the end (run the same command again to resume waiting): "
        f"{job['id']}",
    ]
    assert "--wait" not in stopped.output
    assert cli.api.gate.uploads == [4]

    cli.api.gate.fail_after = None
    resumed = cli("ingest", str(source), "--wait")
    assert resumed.exit_code == 0, resumed.output
    assert "documents: 10 read, 6 sent in 2 jobs, 4 already accepted" in lines_of(resumed.stdout)
    assert cli.api.gate.uploads == [4, 4, 2], "each document was sent once"
    listed = cli("documents", "list", "--limit", "100")
    assert len(lines_of(listed.stdout)) == 1 + 10


def test_a_request_over_the_server_s_limit_is_sent_again_in_halves(tmp_path: Path) -> None:
    settings = api_settings(tmp_path / "server").model_copy(
        update={"ingest": IngestSettings(max_documents_per_request=3, flush_min_interval_s=0)}
    )
    with live_api(settings) as api:
        cli = cli_for(api, tmp_path)  # uploads of 4 documents: one more than the server takes
        result = cli("ingest", str(documents_of(tmp_path / "docs.jsonl", 5)), "--wait")
        assert result.exit_code == 0, result.output
        assert api.gate.uploads == [2, 2, 1]
        assert "jobs: 3 finished: 5 indexed, 0 unchanged, 0 failed, 0 cancelled" in result.stdout


def test_a_lost_state_costs_time_not_correctness(cli: Cli, tmp_path: Path) -> None:
    source = documents_of(tmp_path / "docs.jsonl", 5)
    assert cli("ingest", str(source), "--wait").exit_code == 0
    shutil.rmtree(tmp_path / "client" / "ingest-state")

    again = cli("ingest", str(source), "--wait")
    assert again.exit_code == 0, again.output
    assert lines_of(again.stdout)[-2:] == [
        "documents: 5 read, 5 sent in 2 jobs, 0 already accepted",
        "jobs: 2 finished: 0 indexed, 5 unchanged, 0 failed, 0 cancelled",  # the server skipped
    ]
    restarted = cli("ingest", str(source), "--wait", "--restart")
    assert (
        lines_of(restarted.stdout)[-1]
        == "jobs: 2 finished: 0 indexed, 5 unchanged, 0 failed, 0 cancelled"
    )


def test_failed_documents_exit_non_zero_with_a_summary(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    write(folder / "good.txt", "Granite is an igneous rock.")
    write(folder / "long.txt", "word " * 600)  # 3,000 characters: over the server's 2,000
    write(folder / "poison.md", f"# Bad\n\nThis text holds {POISON}.\n")
    write(folder / "broken.pdf", "not a PDF at all")

    result = cli("ingest", str(folder), "--wait")
    assert result.exit_code == 1, result.output
    out = lines_of(result.stdout)
    summary = out[out.index("documents: 3 read, 2 sent in 1 jobs, 0 already accepted") :]
    assert summary[1] == "jobs: 1 finished: 1 indexed, 0 unchanged, 1 failed, 0 cancelled"
    assert summary[2] == "FAILED: 3 documents (1 unreadable, 1 refused, 1 failed)"
    assert summary[3].startswith("  broken.pdf: unreadable: Pdf")
    assert summary[4] == (
        "  long.txt: refused: text: at most 2000 characters (ingest.max_document_chars), got 3000"
    )
    assert summary[5] == "  poison.md: failed: EncoderError: the encoder choked on poison"
    assert any(line.endswith(", 1 failed") for line in out if line.startswith("indexing: "))

    # Again: the failed documents are tried again, the indexed one is not sent.
    uploads = len(cli.api.gate.uploads)
    again = cli("ingest", str(folder), "--wait")
    assert again.exit_code == 1, again.output
    assert "documents: 3 read, 1 sent in 1 jobs, 1 already accepted" in lines_of(again.stdout)
    assert cli.api.gate.uploads[uploads:] == [1]  # poison.md alone; long.txt refused again


def test_without_wait_unreadable_and_refused_documents_still_fail_the_run(
    cli: Cli, tmp_path: Path
) -> None:
    folder = tmp_path / "mixed"
    write(folder / "good.txt", "Basalt is volcanic.")
    write(folder / "empty.md", "  \n")
    result = cli("ingest", str(folder))
    assert result.exit_code == 1, result.output
    (job,) = [json.loads(line) for line in lines_of(cli("jobs", "list", "--json").stdout)]
    out = lines_of(result.stdout)
    assert out[-4:-2] == [
        "documents: 1 read, 1 sent in 1 jobs, 0 already accepted",
        f"jobs sent (not waited for; run again with --wait): {job['id']}",
    ]
    assert out[-2:] == [
        "FAILED: 1 document (1 unreadable)",
        "  empty.md: unreadable: no text in it",
    ]


def test_a_missing_and_a_blank_text_are_both_refused(cli: Cli, tmp_path: Path) -> None:
    source = write_jsonl(
        tmp_path / "texts.jsonl",
        [
            {"external_id": "good", "text": "Granite is an igneous rock."},
            {"external_id": "missing"},
            {"external_id": "blank", "text": " \n\t "},
        ],
    )
    result = cli("ingest", str(source), "--wait")
    assert result.exit_code == 1, result.output
    out = lines_of(result.stdout)
    failed = out[out.index("FAILED: 2 documents (2 refused)") + 1 :]
    assert [line.split(": ")[:2] for line in failed] == [
        ["  missing", "refused"],
        ["  blank", "refused"],
    ]
    assert "text" in failed[0]
    assert "text: only white space" in failed[1]


def test_a_damaged_pdf_is_read_with_a_warning_in_the_summary(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "papers"
    whole = write_pdf(folder / "whole.pdf", ["Volcanoes erupt where plates meet."])
    data = whole.read_bytes()
    (folder / "damaged.pdf").write_bytes(data[: data.rindex(b"%%EOF")] + b"%%EO")
    result = cli("ingest", str(folder), "--wait")
    assert result.exit_code == 0, result.output
    assert lines_of(result.stdout)[-4:] == [
        "documents: 2 read, 2 sent in 1 jobs, 0 already accepted",
        "read with a warning: 1 file",
        "  damaged.pdf: EOF marker seems truncated",
        "jobs: 1 finished: 2 indexed, 0 unchanged, 0 failed, 0 cancelled",
    ]
    assert "EOF" not in result.stderr  # the library prints nothing of its own


def test_jobs_commands(cli: Cli, tmp_path: Path) -> None:
    assert cli("ingest", str(documents_of(tmp_path / "a.jsonl", 3)), "--wait").exit_code == 0
    (job,) = [json.loads(line) for line in lines_of(cli("jobs", "list", "--json").stdout)]
    assert (job["status"], job["total"], job["indexed"]) == ("succeeded", 3, 3)
    listed = lines_of(cli("jobs", "list").stdout)
    assert listed[0].split() == ["ID", "KIND", "STATUS", "DONE", "FAILED", "CREATED"]
    assert listed[1].split()[:5] == [job["id"], "ingest", "succeeded", "3/3", "0"]
    assert cli("jobs", "list", "--status", "failed").stdout == ""
    shown = lines_of(cli("jobs", "show", job["id"]).stdout)
    assert "status: succeeded" in shown
    assert "indexed: 3" in shown
    assert "kind: ingest" in shown

    cli.api.worker.running.clear()  # jobs stay queued
    queued = cli("ingest", str(documents_of(tmp_path / "b.jsonl", 2)))
    assert queued.exit_code == 0, queued.output
    queued_jobs = cli("jobs", "list", "--json", "--status", "queued").stdout
    (pending,) = [json.loads(line) for line in lines_of(queued_jobs)]
    cancelled = cli("jobs", "cancel", pending["id"])
    assert cancelled.exit_code == 0, cancelled.output
    assert cancelled.stdout.startswith(f"job {pending['id']} cancelled: 0 indexed")
    twice = cli("jobs", "cancel", pending["id"])
    assert twice.exit_code == 1
    assert twice.stderr.startswith("error (job_finished): ")
    missing = cli("jobs", "show", str(uuid.uuid4()))
    assert (missing.exit_code, missing.stderr.split(":")[0]) == (1, "error (job_not_found)")

    # A delete job not started yet has no total: shown as such, not as 0.
    deleting = httpx.post(
        f"{cli.api.url}/v1/documents:delete",
        json={"all": True},
        headers={"Authorization": f"Bearer {cli.api.key}"},
    ).json()
    assert deleting["total"] is None
    listed = lines_of(cli("jobs", "list", "--status", "queued").stdout)
    assert listed[1].split()[:5] == [deleting["job_id"], "delete", "queued", "0/?", "0"]
    shown = lines_of(cli("jobs", "show", deleting["job_id"]).stdout)
    assert "kind: delete" in shown


def test_documents_commands(cli: Cli, tmp_path: Path) -> None:
    source = write_jsonl(
        tmp_path / "docs.jsonl",
        [
            {"external_id": "notes/a b?.md", "title": "A", "text": "Alpha rocks.", "source": "x"},
            {"external_id": "b", "title": "B", "text": "Beta rocks.", "source": "y", "tags": ["t"]},
        ],
    )
    assert cli("ingest", str(source), "--wait").exit_code == 0
    rows = lines_of(cli("documents", "list").stdout)
    assert [r.split()[0] for r in rows] == ["EXTERNAL_ID", "b", "notes/a"]  # "notes/a b?.md"
    only_y = [
        json.loads(line)
        for line in lines_of(cli("documents", "list", "--source", "y", "--json").stdout)
    ]
    assert [(d["external_id"], d["tags"]) for d in only_y] == [("b", ["t"])]

    shown = lines_of(cli("documents", "show", "notes/a b?.md").stdout)
    assert shown[:3] == ["external_id: notes/a b?.md", "status: indexed", "title: A"]
    deleted = cli("documents", "delete", "notes/a b?.md", "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert deleted.stdout.startswith("deleted 'notes/a b?.md' (1 chunks)")
    gone = cli("documents", "show", "notes/a b?.md")
    assert (gone.exit_code, gone.stderr.split(":")[0]) == (1, "error (document_not_found)")


def test_the_api_key_is_sent_as_a_bearer_token(cli: Cli, tmp_path: Path) -> None:
    cli("jobs", "list", HSEARCH_API_KEY="from-the-environment")
    cli("jobs", "list", "--api-key", "from-the-option", HSEARCH_API_KEY="from-the-environment")
    assert {"Bearer from-the-environment", "Bearer from-the-option"} <= cli.api.gate.credentials


def test_an_api_that_does_not_answer_exits_2(cli: Cli) -> None:
    result = cli("jobs", "list", HSEARCH_CLIENT__URL=f"http://127.0.0.1:{free_port()}")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: GET http://127.0.0.1:")
    assert "no answer after 1 tries (ConnectError" in result.stderr


@pytest.mark.process
def test_ingest_waits_for_an_api_that_is_down_then_comes_up(tmp_path: Path) -> None:
    # The command runs in its own process against a port nobody listens on yet; the API
    # is started only once the command has said on stderr that it waits, and the run
    # then completes: sent, indexed, waited for, exit 0.
    settings = api_settings(tmp_path / "server").model_copy(
        update={"ingest": IngestSettings(flush_min_interval_s=0)}
    )
    settings.data_dir.mkdir(parents=True)
    upgrade_database(settings.database_url)
    tenant = settings.api.default_tenant
    with open_tenancy(settings) as tenancy:
        tenancy.ensure_tenant(tenant, actor="test")
        key = tenancy.create_key(tenant, scopes=list(Scope), actor="test").key
    port = free_port()
    env = {
        **os.environ,
        "HSEARCH_DATA_DIR": str(tmp_path / "client"),
        "HSEARCH_CLIENT__URL": f"http://127.0.0.1:{port}",
        "HSEARCH_API_KEY": key,
        "HSEARCH_CLIENT__POLL_INTERVAL_S": "0.05",
    }
    source = documents_of(tmp_path / "docs.jsonl", 3)
    command = [sys.executable, "-c", "from hsearch.cli import app; app()"]
    with subprocess.Popen(
        [*command, "ingest", str(source), "--wait", "--retry-for", "120"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        said: queue.Queue[str] = queue.Queue()

        def read_stderr() -> None:
            for line in process.stderr or ():
                said.put(line)

        reader = threading.Thread(target=read_stderr)
        reader.start()
        try:
            first = said.get(timeout=60)
            assert first.startswith(
                f"waiting for the API: POST http://127.0.0.1:{port}/v1/documents:ndjson: "
                "ConnectError"
            ), first
            assert first.rstrip().endswith("s more")
            with live_api(settings, port=port) as api:
                assert process.wait(timeout=120) == 0
                out = process.stdout.read() if process.stdout else ""
                assert "documents: 3 read, 3 sent in 1 jobs, 0 already accepted" in out, out
                assert api.services.store.count(tenant_id=tenant) == 3
        finally:
            if process.poll() is None:
                process.kill()
            reader.join(10)


def test_ingest_waits_out_the_api_s_rate_limit(tmp_path: Path) -> None:
    # The real limiter's 429 (Retry-After, in the ingest budget that uploads and job
    # reads share): the run waits as asked, says so, and completes.
    settings = api_settings(tmp_path / "server").model_copy(
        update={
            "ingest": IngestSettings(flush_min_interval_s=0),
            "ratelimit": RateLimitSettings(default="5/second"),
        }
    )
    with live_api(settings) as api:
        cli = cli_for(api, tmp_path)
        result = cli(
            "ingest", str(documents_of(tmp_path / "docs.jsonl", 40)), "--wait", "--retry-for", "60"
        )
        assert result.exit_code == 0, result.output
        assert "rate limited: POST http://127.0.0.1:" in result.stderr
        assert "429 rate_limited: rate limit of 5/second per key" in result.stderr
        assert "documents: 40 read, 40 sent in 10 jobs, 0 already accepted" in result.stdout
        assert api.gate.uploads == [4] * 10
