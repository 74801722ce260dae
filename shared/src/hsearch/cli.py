"""``hsearch``: the operator's command line.

``db``, ``reindex``, ``reconcile`` and ``run`` work on the services directly; ``ingest``,
``jobs`` and ``documents`` are HTTP clients of the API like any other (``hsearch.client``),
with its credential (``--api-key`` / ``HSEARCH_API_KEY``), which decides the tenant.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hsearch.config import Settings, get_settings
from hsearch.types import JobStatus

if TYPE_CHECKING:
    from hsearch.client.http import ApiClient

app = typer.Typer(help="hsearch operator commands.", no_args_is_help=True)
db_app = typer.Typer(help="Metadata database.", no_args_is_help=True)
app.add_typer(db_app, name="db")
jobs_app = typer.Typer(help="Ingestion jobs, through the API.", no_args_is_help=True)
app.add_typer(jobs_app, name="jobs")
documents_app = typer.Typer(help="Indexed documents, through the API.", no_args_is_help=True)
app.add_typer(documents_app, name="documents")

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Base URL of the API. Default: HSEARCH_CLIENT__URL, else "
        "http://<api.host>:<api.port> from the settings.",
        show_default=False,
    ),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        help="API key, sent as a bearer token; it decides the tenant. Default: "
        "HSEARCH_API_KEY (better than the command line, which other users can see).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the API's JSON instead.")]
LimitOption = Annotated[int, typer.Option("--limit", min=1, help="At most this many rows.")]


@db_app.command("upgrade")
def db_upgrade(revision: str = typer.Argument("head")) -> None:
    """Apply Alembic migrations up to REVISION (default: head)."""
    from hsearch.db.migrate import upgrade_database  # noqa: PLC0415 - keep `--help` fast

    settings = get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    upgrade_database(settings.database_url, revision)
    typer.echo(f"database at revision {revision}")


@app.command("reindex")
def reindex(
    keep_previous: bool = typer.Option(
        False, "--keep-previous", help="Keep the replaced collection instead of dropping it."
    ),
) -> None:
    """Rebuild the collection from the stored documents with the configured encoder.

    Searches keep answering from the current collection until the new one is complete,
    then switch to it in one step. Run it after a change of encoder or analyzer (the
    API refuses a collection built with another one), with ingestion paused.
    """
    import time  # noqa: PLC0415 - keep `--help` fast

    from hsearch.errors import HsearchError  # noqa: PLC0415
    from hsearch.runtime import reindexing  # noqa: PLC0415
    from hsearch.stack import milvus_for_command  # noqa: PLC0415

    settings = get_settings()
    last = 0.0

    def progress(done: int, total: int) -> None:
        nonlocal last
        if time.monotonic() - last >= 2 or done == total:
            last = time.monotonic()
            typer.echo(f"  {done}/{total} documents encoded")

    try:
        with milvus_for_command(settings) as uri:
            milvus = settings.milvus.model_copy(update={"uri": uri})
            with reindexing(settings.model_copy(update={"milvus": milvus})) as service:
                typer.echo(f"rebuilding {settings.milvus.collection!r} at {uri}")
                report = service.run(keep_previous=keep_previous, progress=progress)
    except HsearchError as exc:
        typer.echo(f"reindex failed ({exc.code}): {exc.message}", err=True)
        raise typer.Exit(2) from exc
    previous = report.previous or "-"
    if report.previous is not None:
        previous += " (kept)" if report.kept_previous else " (dropped)"
    typer.echo(
        f"{settings.milvus.collection!r} now searches {report.collection!r}: "
        f"{report.documents} documents, {report.chunks} chunks, {report.tenants} tenants "
        f"in {report.seconds:.1f} s; encoder {report.encoder}; previous {previous}"
    )


@app.command("reconcile")
def reconcile(
    repair: bool = typer.Option(
        False, "--repair", help="Delete orphan chunks; submit documents with missing chunks."
    ),
    tenant: list[str] = typer.Option(  # noqa: B008 - typer reads options from defaults
        [], "--tenant", help="Only this tenant (repeatable; default: every tenant)."
    ),
) -> None:
    """Report (and with --repair fix) drift between the metadata database and Milvus:
    orphan chunks, documents with missing chunks. One JSON line per tenant; exits 1 when
    drift is found and not repaired."""
    import json  # noqa: PLC0415 - keep `--help` fast

    from hsearch.errors import HsearchError  # noqa: PLC0415
    from hsearch.runtime import build_services  # noqa: PLC0415
    from hsearch.stack import milvus_for_command  # noqa: PLC0415

    settings = get_settings()
    drifted = False
    try:
        with milvus_for_command(settings) as uri:
            milvus = settings.milvus.model_copy(update={"uri": uri})
            services = build_services(settings.model_copy(update={"milvus": milvus}))
            try:
                reconciler = services.reconciler()
                for tenant_id in tenant or reconciler.tenants():
                    drift = reconciler.check(tenant_id)
                    if repair and not drift.clean:
                        drift = reconciler.repair(drift)
                    drifted |= not drift.clean and not drift.repaired
                    typer.echo(
                        json.dumps(
                            {
                                "tenant": drift.tenant_id,
                                "documents": drift.documents,
                                "recorded_chunks": drift.recorded_chunks,
                                "stored_chunks": drift.stored_chunks,
                                "orphan_chunks": len(drift.orphans),
                                "documents_missing_chunks": drift.missing,
                                "repaired": drift.repaired,
                                "repair_job": str(drift.repair_job) if drift.repair_job else None,
                            }
                        )
                    )
            finally:
                services.close()
    except HsearchError as exc:
        typer.echo(f"reconcile failed ({exc.code}): {exc.message}", err=True)
        raise typer.Exit(2) from exc
    raise typer.Exit(1 if drifted else 0)


@app.command("run")
def run(
    sample: bool = typer.Option(True, help="Ingest the bundled sample corpus on first start."),
    workers: int = typer.Option(1, min=1, max=16, help="Celery worker processes."),
) -> None:
    """Run the local stack in the foreground: Milvus Lite server, migrations, API, worker."""
    from hsearch.stack import run_stack  # noqa: PLC0415 - keep `--help` fast

    raise typer.Exit(run_stack(get_settings(), ingest_sample=sample, workers=workers))


@app.command("ingest")
def ingest(  # noqa: PLR0917 - typer reads a command's options from its parameters
    paths: Annotated[
        list[Path],
        typer.Argument(
            exists=True,
            show_default=False,
            help='JSON lines (.jsonl), JSON (.json: a list, or {"documents": [...]}), '
            ".txt, .md, .html or .pdf files, or folders of the latter (recursive).",
        ),
    ],
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Wait for the jobs, showing progress."),
    ] = False,
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="Source of documents read from files (default: the folder's name), and "
            "of JSON documents that name none.",
            show_default=False,
        ),
    ] = None,
    restart: Annotated[
        bool,
        typer.Option(
            "--restart",
            help="Forget what earlier runs had accepted and send everything (the server "
            "still skips unchanged documents).",
        ),
    ] = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Send documents to the API; running it again sends only what was not accepted.

    Exits 1 when documents failed (unreadable, refused, or failed in a
    job), listing the first errors by external id; 2 when the API cannot
    be used; 130 when interrupted: run it again to resume.
    """
    from hsearch.client.http import ClientError  # noqa: PLC0415 - keep `--help` fast
    from hsearch.client.progress import create_progress  # noqa: PLC0415
    from hsearch.client.upload import IngestOptions, Uploader  # noqa: PLC0415

    settings = get_settings()
    options = IngestOptions(
        wait=wait,
        source=source,
        restart=restart,
        batch_documents=settings.client.batch_documents,
        batch_bytes=settings.client.batch_bytes,
        poll_interval_s=settings.client.poll_interval_s,
    )
    key = _api_key(settings, api_key)
    code = 0
    with _client(settings, url, key) as client:
        progress = create_progress()
        uploader = Uploader(
            client,
            state_dir=settings.client_state_dir,
            api_key=key,
            progress=progress,
            options=options,
        )
        stopped = ""
        try:
            uploader.run(paths)
        except ClientError as exc:
            code, stopped = 2, f"ingest stopped: {exc}"
        except KeyboardInterrupt:
            code, stopped = 130, "interrupted: run the same command again to resume"
        finally:
            progress.close()
    if stopped:
        typer.echo(stopped, err=True)
    for line in uploader.report.summary():
        typer.echo(line)
    raise typer.Exit(code or uploader.report.exit_code)


@jobs_app.command("list")
def jobs_list(
    status: Annotated[
        JobStatus | None, typer.Option("--status", help="Only jobs of this status.")
    ] = None,
    limit: LimitOption = 20,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """The tenant's ingestion jobs, newest first."""
    import json  # noqa: PLC0415 - keep `--help` fast

    from hsearch.client.display import job_rows  # noqa: PLC0415

    with _api(url, api_key) as client:
        jobs = list(client.jobs(status=status, limit=limit))
    for line in [json.dumps(j.raw) for j in jobs] if as_json else job_rows(jobs):
        typer.echo(line)


@jobs_app.command("show")
def jobs_show(
    job_id: Annotated[str, typer.Argument(help="The job's id.", show_default=False)],
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """A job's status, counters and first per-document errors."""
    import json  # noqa: PLC0415 - keep `--help` fast

    from hsearch.client.display import job_lines  # noqa: PLC0415

    with _api(url, api_key) as client:
        job = client.job(job_id)
    for line in [json.dumps(job.raw, indent=2)] if as_json else job_lines(job):
        typer.echo(line)


@jobs_app.command("cancel")
def jobs_cancel(
    job_id: Annotated[str, typer.Argument(help="The job's id.", show_default=False)],
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Cancel a queued or running job: indexed documents stay, the rest are not indexed."""
    with _api(url, api_key) as client:
        job = client.cancel_job(job_id)
    typer.echo(f"job {job.id} {job.status}: {job.indexed} indexed, {job.skipped} unchanged")


@documents_app.command("list")
def documents_list(
    source: Annotated[
        str | None,
        typer.Option("--source", help="Only documents of this source.", show_default=False),
    ] = None,
    limit: LimitOption = 50,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """The tenant's indexed documents, in external id order."""
    import json  # noqa: PLC0415 - keep `--help` fast

    from hsearch.client.display import document_rows  # noqa: PLC0415

    with _api(url, api_key) as client:
        documents = list(client.documents(source=source, limit=limit))
    for line in [json.dumps(d) for d in documents] if as_json else document_rows(documents):
        typer.echo(line)


@documents_app.command("show")
def documents_show(
    external_id: Annotated[str, typer.Argument(help="Its external id.", show_default=False)],
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """One document: indexed (its fields and chunk count) or pending in a job."""
    import json  # noqa: PLC0415 - keep `--help` fast

    from hsearch.client.display import document_lines  # noqa: PLC0415

    with _api(url, api_key) as client:
        document = client.document(external_id)
    for line in [json.dumps(document, indent=2)] if as_json else document_lines(document):
        typer.echo(line)


@documents_app.command("delete")
def documents_delete(
    external_id: Annotated[str, typer.Argument(help="Its external id.", show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask first.")] = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Delete an indexed document: its chunks, metadata and statistics."""
    if not yes:
        typer.confirm(f"delete document {external_id!r}?", abort=True)
    with _api(url, api_key) as client:
        deleted = client.delete_document(external_id)
    typer.echo(f"deleted {deleted['external_id']!r} ({deleted['deleted_chunks']} chunks)")


def _api_key(settings: Settings, given: str | None) -> str | None:
    if given:
        return given
    return settings.api_key.get_secret_value() if settings.api_key else None


def _client(settings: Settings, url: str | None, api_key: str | None) -> ApiClient:
    from hsearch.client.http import ApiClient  # noqa: PLC0415 - keep `--help` fast

    return ApiClient(
        (url or settings.client_url).rstrip("/"),
        api_key=api_key,
        timeout_s=settings.client.timeout_s,
        retries=settings.client.retries,
    )


@contextmanager
def _api(url: str | None, api_key: str | None) -> Iterator[ApiClient]:
    """A client of the API; an error answer exits 1 with its code and detail, no answer
    exits 2."""
    from hsearch.client.http import ApiError, ClientError  # noqa: PLC0415 - keep `--help` fast

    settings = get_settings()
    try:
        with _client(settings, url, _api_key(settings, api_key)) as client:
            yield client
    except ApiError as exc:
        typer.echo(f"error ({exc.code}): {exc.detail}", err=True)
        raise typer.Exit(1) from exc
    except ClientError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


if __name__ == "__main__":
    app()
