"""Celery tasks: take ids, call one service method, acknowledge late."""
