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
