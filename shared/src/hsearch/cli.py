"""``hsearch``: the operator's command line."""

from __future__ import annotations

import typer

from hsearch.config import get_settings

app = typer.Typer(help="hsearch operator commands.", no_args_is_help=True)
db_app = typer.Typer(help="Metadata database.", no_args_is_help=True)
app.add_typer(db_app, name="db")


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


if __name__ == "__main__":
    app()
