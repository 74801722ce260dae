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
)
# A pool process loads the encoder when it starts (signals.py), before it takes a task.
app.conf.worker_proc_alive_timeout = 300
app.conf.include = ["hsearch_ingest.tasks.ingest"]

from hsearch_ingest import signals  # noqa: E402,F401 - connects the process signals
