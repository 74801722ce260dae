"""The Celery app both edges share, per broker (no broker is contacted)."""

from __future__ import annotations

from hsearch.config import Settings
from hsearch.ingestion.queue import create_celery


def test_amqp_heartbeats_are_off_unless_set() -> None:
    """A worker sends no heartbeat while it runs a task: with heartbeats on, RabbitMQ
    closes its connection during any turn that outlasts them
    (docs/adr/0025-broker-heartbeats-off.md)."""
    assert Settings().broker.heartbeat_s == 0
    app = create_celery("amqp://guest:guest@127.0.0.1:5672//")
    assert app.conf.broker_heartbeat == 0
    assert app.conf.broker_transport_options == {"confirm_publish": True}
    assert create_celery("amqp://h//", heartbeat_s=30).conf.broker_heartbeat == 30


def test_redis_visibility_and_socket_timeouts_are_the_given_ones() -> None:
    """Every wait on a Redis broker's connection is bounded (redis-py waits forever by
    default); test_worker_crash.py freezes a worker's connections under it."""
    assert Settings().broker.socket_timeout_s == 10
    app = create_celery("redis://127.0.0.1:6379/0", visibility_timeout_s=120, socket_timeout_s=9)
    assert app.conf.broker_transport_options == {
        "visibility_timeout": 120,
        "socket_timeout": 9,
        "socket_connect_timeout": 9,
        "socket_keepalive": True,
        "health_check_interval": 9,
    }
