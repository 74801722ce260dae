"""hsearch ingestion workers (Celery)."""
