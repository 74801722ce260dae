"""``hsearch``: the operator's command line.

``db``, ``reindex``, ``reconcile``, ``links``, ``run``, ``tenants``, ``keys`` and
``operator`` work on the services directly (run them on the server, with its settings);
``search``,
``ask``, ``ingest``, ``jobs``, ``documents`` and ``mcp`` are HTTP clients of the API like
any other (the ``hsearch-client`` package, with what only the command line needs in
``hsearch.client``), with its credential (``--api-key`` / ``HSEARCH_API_KEY``), which
decides the tenant.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hsearch.config import Settings, get_settings
from hsearch.types import JobStatus, Scope, SearchMode

if TYPE_CHECKING:
    from datetime import datetime

    from hsearch.tenancy.service import KeyView, TenancyService, TenantView
    from hsearch_client import Client

app = typer.Typer(help="hsearch operator commands.", no_args_is_help=True)
db_app = typer.Typer(help="Metadata database.", no_args_is_help=True)
app.add_typer(db_app, name="db")
jobs_app = typer.Typer(help="Ingestion jobs, through the API.", no_args_is_help=True)
app.add_typer(jobs_app, name="jobs")
documents_app = typer.Typer(help="Indexed documents, through the API.", no_args_is_help=True)
app.add_typer(documents_app, name="documents")
tenants_app = typer.Typer(
    help="Tenants (on the server's database; prints JSON).", no_args_is_help=True
)
app.add_typer(tenants_app, name="tenants")
keys_app = typer.Typer(
    help="A tenant's API keys (on the server's database; prints JSON).", no_args_is_help=True
)
app.add_typer(keys_app, name="keys")
links_app = typer.Typer(
    help="The links between a tenant's documents (on the server's database).",
    no_args_is_help=True,
)
app.add_typer(links_app, name="links")
operator_app = typer.Typer(
    help="Operator credentials: act for any tenant, audited.", no_args_is_help=True
)
app.add_typer(operator_app, name="operator")

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
TenantOption = Annotated[str, typer.Option("--tenant", help="The tenant's id.", show_default=False)]


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
        False,
        "--repair",
        help=(
            "Delete orphan chunks; submit documents with missing chunks; rewrite drifted "
            "lexical statistics and vocabulary."
        ),
    ),
    tenant: list[str] = typer.Option(  # noqa: B008 - typer reads options from defaults
        [], "--tenant", help="Only this tenant (repeatable; default: every tenant)."
    ),
) -> None:
    """Report (and with --repair fix) drift between the documents and what is derived
    from them: orphan chunks, documents with missing chunks (Milvus), lexical statistics
    and vocabulary. One JSON line per tenant; exits 1 when drift is found and not
    repaired."""
    import json  # noqa: PLC0415 - keep `--help` fast

    from hsearch.errors import HsearchError  # noqa: PLC0415
    from hsearch.ingestion.operations.datadir import adopt_data_directory  # noqa: PLC0415
    from hsearch.runtime import build_services  # noqa: PLC0415
    from hsearch.stack import milvus_for_command  # noqa: PLC0415

    settings = get_settings()
    drifted = False
    try:
        with milvus_for_command(settings, check_owner=False) as uri:
            milvus = settings.milvus.model_copy(update={"uri": uri})
            services = build_services(
                settings.model_copy(update={"milvus": milvus}), load_encoder=False
            )
            try:
                reconciler = services.reconciler()
                reconciler.require(tenant)
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
                                **drift.figures(),
                                "repaired": drift.repaired,
                                "repair_job": str(drift.repair_job) if drift.repair_job else None,
                            }
                        )
                    )
            finally:
                services.close()
        if repair and not tenant:
            # Every tenant's drift repaired: the vector data is this database's now.
            owner = adopt_data_directory(settings)
            if owner is not None:
                typer.echo(
                    f"data directory {settings.data_dir.resolve()} recorded as metadata "
                    f"database {owner.database}'s (id {owner.database_id})",
                    err=True,
                )
    except HsearchError as exc:
        typer.echo(f"reconcile failed ({exc.code}): {exc.message}", err=True)
        raise typer.Exit(2) from exc
    raise typer.Exit(1 if drifted else 0)


@links_app.command("relink")
def links_relink(tenant: TenantOption) -> None:
    """Find the links in the tenant's texts again, against all its documents: mentions
    of documents indexed after the text, links to them, and a change of the tenant's
    text_links setting (PATCH /v1/settings) reach the documents indexed before. Given
    links are left as they are; running it again changes nothing. Prints one JSON line."""
    from hsearch.errors import HsearchError  # noqa: PLC0415 - keep `--help` fast
    from hsearch.runtime import relinking  # noqa: PLC0415

    try:
        with relinking(get_settings()) as relinker:
            report = relinker.relink(tenant)
    except HsearchError as exc:
        typer.echo(f"relink failed ({exc.code}): {exc.message}", err=True)
        raise typer.Exit(2) from exc
    _print_json(
        {
            "tenant": report.tenant_id,
            "documents": report.documents,
            "searched": report.searched,
            "changed": report.changed,
            "text_links": report.links,
        }
    )


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
    retry_for: Annotated[
        float | None,
        typer.Option(
            "--retry-for",
            min=0,
            help="Seconds to keep trying a request the API does not answer (connection "
            "refused, 502/503/504: a restart), with backoff, or refuses with 429 (rate "
            "limit: after its Retry-After). Default: "
            "HSEARCH_CLIENT__RETRY_FOR_S, else 120.",
            show_default=False,
        ),
    ] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Send documents to the API; running it again sends only what was not accepted.

    Exits 1 when documents failed (unreadable, refused, or failed in a
    job), listing the first errors by external id; 2 when the API cannot
    be used; 130 when interrupted: run it again to resume.
    """
    from hsearch.client.progress import create_progress  # noqa: PLC0415
    from hsearch.client.upload import IngestOptions, Uploader  # noqa: PLC0415
    from hsearch_client import ClientError  # noqa: PLC0415 - keep `--help` fast

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
    retry_for_s = settings.client.retry_for_s if retry_for is None else retry_for
    with _client(settings, url, key, retry_for_s=retry_for_s) as client:
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


@app.command("ask")
def ask(  # noqa: PLR0917 - typer reads a command's options from its parameters
    question: Annotated[str, typer.Argument(help="The question.", show_default=False)],
    passages: Annotated[
        int | None,
        typer.Option("--passages", min=1, max=50, help="Passages to retrieve (default: 5)."),
    ] = None,
    lazy: Annotated[
        bool,
        typer.Option(
            "--lazy",
            help="Lazy graph search: test candidates, follow links and concepts, answer "
            "from the claims (docs/lazy.md).",
        ),
    ] = False,
    tests: Annotated[
        int | None,
        typer.Option(
            "--budget",
            min=1,
            help="With --lazy: relevance tests it may run (default: the server's).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Ask the tenant's documents: the answer streams, then its checked citations."""
    import json  # noqa: PLC0415 - keep `--help` fast

    from hsearch.client.display import answer_footer  # noqa: PLC0415
    from hsearch_client import DeltaEvent, DoneEvent, ErrorEvent, ProgressEvent  # noqa: PLC0415

    if tests is not None and not lazy:
        typer.echo("error (invalid_request): --budget: only with --lazy", err=True)
        raise typer.Exit(1)
    fields: dict[str, Any] = {}
    if lazy:
        fields = {"strategy": "lazy", "budget": {"relevance_tests": tests} if tests else None}
    with _api(url, api_key) as client:
        for event in client.answer_stream(question, passages=passages, **fields):
            if as_json:
                if isinstance(event, DoneEvent):
                    typer.echo(json.dumps(event.answer.to_json(), ensure_ascii=False))
                continue
            if isinstance(event, ProgressEvent):
                typer.echo(
                    f"[{event.stage}: {event.tested} tested, {event.relevant} relevant, "
                    f"{event.claims} claims]",
                    err=True,
                )
            elif isinstance(event, DeltaEvent):
                typer.echo(event.text, nl=False)
            elif isinstance(event, ErrorEvent):
                typer.echo(f"\n[the model broke off: {event.error}: {event.detail}]", err=True)
            elif isinstance(event, DoneEvent):
                for line in answer_footer(event.answer):
                    typer.echo(line)


@app.command("search")
def search(  # noqa: PLR0917 - typer reads a command's options from its parameters
    query: Annotated[str, typer.Argument(help="What to search for.", show_default=False)],
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, help="Hits per page.")] = 10,
    mode: Annotated[
        SearchMode | None,
        typer.Option(
            "--mode", help="The legs to search with (default: hybrid).", show_default=False
        ),
    ] = None,
    filter_json: Annotated[
        str | None,
        typer.Option(
            "--filter",
            help="A filter as JSON, in the search filter language (docs/filters.md): "
            '\'{"source": {"eq": "guide"}}\'.',
            show_default=False,
        ),
    ] = None,
    chunks: Annotated[
        bool,
        typer.Option(
            "--chunks", help="Every matching passage, not one hit per document (its best)."
        ),
    ] = False,
    cursor: Annotated[
        str | None,
        typer.Option(
            "--cursor", help="The next page: the cursor a page printed last.", show_default=False
        ),
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Search the tenant's documents: titles, and snippets with the matches marked (bold
    on a terminal, [brackets] elsewhere); --json for the API's whole response."""
    import json  # noqa: PLC0415 - keep `--help` fast

    from hsearch.client.display import search_lines  # noqa: PLC0415

    try:
        filter_ = None if filter_json is None else json.loads(filter_json)
    except ValueError as exc:
        typer.echo(f"error (invalid_request): --filter: not JSON: {exc}", err=True)
        raise typer.Exit(1) from exc
    with _api(url, api_key) as client:
        response = client.search(
            query,
            top_k=top_k,
            mode=mode,
            filter=filter_,
            group_by_document=not chunks,
            cursor=cursor,
        )
    if as_json:
        typer.echo(json.dumps(response.to_json(), ensure_ascii=False))
        return
    tty = typer.get_text_stream("stdout").isatty()
    for line in search_lines(response, tty=tty):
        typer.echo(line)


@app.command("mcp")
def mcp_stdio(url: UrlOption = None, api_key: ApiKeyOption = None) -> None:
    """Serve hsearch's tools to a model over MCP on stdin and stdout (for a desktop
    client to start): search, answer, get_document, list_documents, submit_documents,
    each a request to the API with the key (HSEARCH_API_KEY), which decides the tenant
    and what the tools may do (docs/mcp.md)."""
    import anyio  # noqa: PLC0415 - keep `--help` fast

    from hsearch_api.mcp.remote import remote_server  # noqa: PLC0415
    from hsearch_client import AsyncClient, Retry  # noqa: PLC0415

    settings = get_settings()
    key = _api_key(settings, api_key)
    if not key:
        typer.echo("error: no API key: set HSEARCH_API_KEY (or --api-key)", err=True)
        raise typer.Exit(2)

    async def serve() -> None:
        async with AsyncClient(
            url or settings.client_url,
            api_key=key,
            timeout_s=settings.client.timeout_s,
            retry=Retry(retries=settings.client.retries),
        ) as client:
            await remote_server(client).run_stdio_async()

    anyio.run(serve)


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
        jobs = list(client.list_jobs(status=status, limit=limit))
    for line in [json.dumps(j.to_json()) for j in jobs] if as_json else job_rows(jobs):
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
        job = client.get_job(job_id)
    for line in [json.dumps(job.to_json(), indent=2)] if as_json else job_lines(job):
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
        documents = list(client.list_documents(source=source, limit=limit))
    rows = [json.dumps(d.to_json()) for d in documents] if as_json else document_rows(documents)
    for line in rows:
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
        document = client.get_document(external_id)
    raw = [json.dumps(document.to_json(), indent=2)]
    for line in raw if as_json else document_lines(document):
        typer.echo(line)


@documents_app.command("delete")
def documents_delete(
    external_id: Annotated[str, typer.Argument(help="Its external id.", show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask first.")] = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Delete a document: its chunks, metadata and statistics, and its versions still
    pending in jobs (submitted before the delete, they are skipped)."""
    if not yes:
        typer.confirm(f"delete document {external_id!r}?", abort=True)
    with _api(url, api_key) as client:
        deleted = client.delete_document(external_id)
    line = f"deleted {deleted.external_id!r} ({deleted.deleted_chunks} chunks)"
    superseded = [str(job) for job in deleted.superseded_jobs]
    if superseded:
        line += f"; its pending version skipped in job {', '.join(superseded)}"
    typer.echo(line)


@tenants_app.command("create")
def tenants_create(
    name: Annotated[str, typer.Argument(help="The tenant's name.", show_default=False)],
    tenant_id: Annotated[
        str | None,
        typer.Option(
            "--id",
            help="Its id (letters, digits, _ and -). Default: generated.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Create a tenant; prints {"tenant_id", "api_key"}: its first key, with every scope
    (admin included), shown this once."""
    with _tenancy() as tenancy:
        created = tenancy.create_tenant(name, tenant_id=tenant_id, actor=_actor())
    _print_json({"tenant_id": created.tenant.id, "api_key": created.key.key})


@tenants_app.command("list")
def tenants_list() -> None:
    """Every tenant, one JSON object per line."""
    with _tenancy() as tenancy:
        tenants = tenancy.list_tenants()
    for tenant in tenants:
        _print_json(_tenant_json(tenant))


@tenants_app.command("suspend")
def tenants_suspend(
    tenant_id: Annotated[str, typer.Argument(help="The tenant's id.", show_default=False)],
) -> None:
    """Refuse every key of the tenant (403) until it is resumed; its data is kept. API
    processes apply it within auth.cache_ttl_s."""
    from hsearch.types import TenantStatus  # noqa: PLC0415 - keep `--help` fast

    with _tenancy() as tenancy:
        tenant = tenancy.set_tenant_status(tenant_id, TenantStatus.SUSPENDED, actor=_actor())
    _print_json(_tenant_json(tenant))


@tenants_app.command("delete")
def tenants_delete(
    tenant_id: Annotated[str, typer.Argument(help="The tenant's id.", show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask to confirm.")] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Sweep the store and caches even if the tenant row is gone."),
    ] = False,
    grace_s: Annotated[
        float | None,
        typer.Option(
            "--grace-s",
            help="Seconds to wait after suspending the tenant, for API processes to drop "
            "its cached credentials. Default: auth.cache_ttl_s.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Delete a tenant and everything it has: documents, jobs, keys, statistics (the
    metadata database), its chunks (Milvus) and what is cached of it. Irreversible.
    Prints a JSON report."""
    from hsearch.errors import HsearchError  # noqa: PLC0415 - keep `--help` fast
    from hsearch.runtime import build_services  # noqa: PLC0415
    from hsearch.stack import milvus_for_command  # noqa: PLC0415

    if not yes:
        typer.confirm(f"delete tenant {tenant_id!r} and all of its data?", abort=True)
    settings = get_settings()
    try:
        with milvus_for_command(settings) as uri:
            milvus = settings.milvus.model_copy(update={"uri": uri})
            services = build_services(
                settings.model_copy(update={"milvus": milvus}), load_encoder=False
            )
            try:
                grace = settings.auth.cache_ttl_s if grace_s is None else grace_s
                if grace > 0:
                    typer.echo(f"suspended; waiting {grace:.0f} s for API processes", err=True)
                report = services.tenant_purge().delete(
                    tenant_id, actor=_actor(), force=force, grace_s=grace
                )
            finally:
                services.close()
    except HsearchError as exc:
        typer.echo(f"tenants delete failed ({exc.code}): {exc.message}", err=True)
        raise typer.Exit(2) from exc
    _print_json(
        {
            "tenant_id": report.tenant_id,
            "deleted": {"chunks": report.chunks, **report.rows},
            "jobs_cancelled": report.jobs_cancelled,
            "hooks_failed": list(report.hooks_failed),
            "seconds": round(report.seconds, 3),
        }
    )
    if report.hooks_failed:
        raise typer.Exit(1)


@tenants_app.command("resume")
def tenants_resume(
    tenant_id: Annotated[str, typer.Argument(help="The tenant's id.", show_default=False)],
) -> None:
    """Accept the tenant's keys again."""
    from hsearch.types import TenantStatus  # noqa: PLC0415 - keep `--help` fast

    with _tenancy() as tenancy:
        tenant = tenancy.set_tenant_status(tenant_id, TenantStatus.ACTIVE, actor=_actor())
    _print_json(_tenant_json(tenant))


@keys_app.command("create")
def keys_create(
    tenant: TenantOption,
    scopes: Annotated[
        list[Scope],
        typer.Option("--scope", help="What the key may do (repeatable).", show_default=False),
    ],
    expires_in: Annotated[
        str | None,
        typer.Option(
            "--expires-in",
            help="Lifetime: 45s, 90m, 12h, 30d, 2w. Default: no expiry.",
            show_default=False,
        ),
    ] = None,
    name: Annotated[str, typer.Option("--name", help="What the key is for.")] = "",
) -> None:
    """Create a key of a tenant; prints it (shown this once) with its id and scopes."""
    from hsearch.db.base import utcnow  # noqa: PLC0415 - keep `--help` fast
    from hsearch.tenancy.keys import parse_duration  # noqa: PLC0415

    with _tenancy() as tenancy:
        expires_at = (
            None
            if expires_in is None
            else utcnow() + parse_duration(expires_in, field="--expires-in")
        )
        created = tenancy.create_key(
            tenant, scopes=scopes, name=name, expires_at=expires_at, actor=_actor()
        )
    _print_json({"api_key": created.key, **_key_json(created.view)})


@keys_app.command("list")
def keys_list(tenant: TenantOption) -> None:
    """A tenant's keys (revoked and expired ones too), one JSON object per line; the keys
    themselves are never shown again."""
    with _tenancy() as tenancy:
        keys = tenancy.list_keys(tenant)
    for key in keys:
        _print_json(_key_json(key))


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (keys list).", show_default=False)],
) -> None:
    """Revoke a key (any tenant's, or an operator's). API processes refuse it within
    auth.cache_ttl_s."""
    import uuid  # noqa: PLC0415 - keep `--help` fast

    try:
        parsed = uuid.UUID(key_id)
    except ValueError:
        typer.echo(f"error (invalid_request): KEY_ID: not a key id: {key_id!r}", err=True)
        raise typer.Exit(1) from None
    with _tenancy() as tenancy:
        key = tenancy.revoke_key(parsed, actor=_actor())
    _print_json(_key_json(key))


@operator_app.command("create")
def operator_create(
    name: Annotated[str, typer.Option("--name", help="Whose credential it is.")] = "",
) -> None:
    """Create an operator credential; prints it (shown this once). It acts for the tenant
    named in X-Hsearch-Tenant, with every scope, each request written to the audit log."""
    with _tenancy() as tenancy:
        created = tenancy.create_operator_key(name=name, actor=_actor())
    _print_json({"api_key": created.key, **_key_json(created.view)})


@contextmanager
def _tenancy() -> Iterator[TenancyService]:
    """The tenancy service on the configured database; a refused request exits 1 with
    its code and detail."""
    from hsearch.errors import HsearchError  # noqa: PLC0415 - keep `--help` fast
    from hsearch.tenancy.factory import open_tenancy  # noqa: PLC0415

    try:
        with open_tenancy(get_settings()) as tenancy:
            yield tenancy
    except HsearchError as exc:
        typer.echo(f"error ({exc.code}): {exc.message}", err=True)
        raise typer.Exit(1) from exc


def _actor() -> str:
    """Who runs the command, for the audit log: the operating system's user."""
    import getpass  # noqa: PLC0415 - keep `--help` fast

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no user name (a container's numeric user)
        return "cli"


def _print_json(value: dict[str, object]) -> None:
    import json  # noqa: PLC0415 - keep `--help` fast

    typer.echo(json.dumps(value))


def _tenant_json(tenant: TenantView) -> dict[str, object]:
    return {
        "tenant_id": tenant.id,
        "name": tenant.name,
        "status": tenant.status.value,
        "created_at": tenant.created_at.isoformat(),
    }


def _key_json(key: KeyView) -> dict[str, object]:
    return {
        "key_id": str(key.id),
        "prefix": key.prefix,
        "role": key.role.value,
        "tenant_id": key.tenant_id,
        "scopes": list(key.scopes),
        "name": key.name,
        "created_at": key.created_at.isoformat(),
        "expires_at": _iso(key.expires_at),
        "revoked_at": _iso(key.revoked_at),
        "last_used_at": _iso(key.last_used_at),
    }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _api_key(settings: Settings, given: str | None) -> str | None:
    if given:
        return given
    return settings.api_key.get_secret_value() if settings.api_key else None


def _client(
    settings: Settings, url: str | None, api_key: str | None, *, retry_for_s: float | None = None
) -> Client:
    """A client of the API; with ``retry_for_s``, a request the API does not answer (or
    answers 429) is tried for that long (else ``client.retries`` times), each wait said
    on stderr."""
    from hsearch_client import Client, Retry  # noqa: PLC0415 - keep `--help` fast

    return Client(
        url or settings.client_url,
        api_key=api_key,
        timeout_s=settings.client.timeout_s,
        retry=Retry(retries=settings.client.retries, retry_for_s=retry_for_s),
        on_retry=_say_waiting,
    )


def _say_waiting(text: str) -> None:
    typer.echo(text, err=True)


@contextmanager
def _api(url: str | None, api_key: str | None) -> Iterator[Client]:
    """A client of the API; an error answer exits 1 with its code and detail, no usable
    answer (none, or 502/503/504 after the retries) exits 2."""
    from hsearch_client import (  # noqa: PLC0415 - keep `--help` fast
        ApiError,
        ApiUnavailableError,
        ClientError,
    )

    settings = get_settings()
    try:
        with _client(settings, url, _api_key(settings, api_key)) as client:
            yield client
    except ApiUnavailableError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    except ApiError as exc:
        typer.echo(f"error ({exc.code}): {exc.detail}", err=True)
        raise typer.Exit(1) from exc
    except ClientError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def main() -> None:
    """The ``hsearch`` command: settings the process cannot start with (a value out of
    range, an ``HSEARCH_`` variable that sets nothing) are one line naming the variable
    or field on stderr and exit 2, not a traceback."""
    from pydantic import ValidationError  # noqa: PLC0415 - keep `--help` fast

    from hsearch.errors import ConfigurationError  # noqa: PLC0415

    try:
        app()
    except ConfigurationError as exc:
        typer.echo(f"error (configuration): {exc}", err=True)
        raise SystemExit(2) from exc
    except ValidationError as exc:
        if exc.title != Settings.__name__:
            raise
        problems = "; ".join(
            f"{'.'.join(map(str, error['loc']))}: {error['msg']}" for error in exc.errors()
        )
        typer.echo(f"error (configuration): settings: {problems}", err=True)
        raise SystemExit(2) from exc


if __name__ == "__main__":
    main()
