"""The worker's Celery app: ``celery -A hsearch_ingest.celery_app:app worker -Q ingest``."""

from __future__ import annotations

from hsearch.config import get_settings
from hsearch.ingestion.queue import create_celery
from hsearch.logging import configure_logging

settings = get_settings()
configure_logging(settings.log_level, settings.log_format.value)
app = create_celery(
    settings.broker_url,
    name="hsearch-ingest",
    visibility_timeout_s=2 * settings.ingest.lease_s,
    heartbeat_s=settings.broker.heartbeat_s,
    socket_timeout_s=settings.broker.socket_timeout_s,
)
# Tasks run in the worker process itself, whatever the command line says (a ``-P
# prefork`` is replaced by this): a prefork child killed outright (kill -9, the OOM
# killer) can leave its parent alive, holding the lost task as running and consuming
# nothing more, while its liveness probe still answers (docs/adr/0022-one-process-per-worker.md, One
# process per worker). With no child, a killed worker is a dead process, which the
# supervisor (`hsearch run`, compose, Kubernetes) starts again. It loads the encoder
# when the pool starts (signals.py), before it takes a task.
app.conf.worker_pool = "solo"
app.conf.include = ["hsearch_ingest.tasks.ingest"]

from hsearch_ingest import signals  # noqa: E402,F401 - connects the process signals
