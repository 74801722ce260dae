"""Webhooks: the URL a client gives with a job is called once the job has ended.

Deliveries follow the Standard Webhooks specification (standardwebhooks.com), so a
receiver verifies them with any of its libraries: the body is JSON, the headers carry
``webhook-id`` (the job id: the same on every retry of one event, for the receiver's
deduplication), ``webhook-timestamp`` and ``webhook-signature`` (HMAC-SHA256 of id,
timestamp and body under ``webhooks.secret``, signed with the ``standardwebhooks``
package).

A delivery is at least once and never blocks ingestion. The state lives on the job row
(``webhook_*``), so it survives restarts: a worker's sweeper (every
``ingest.sweep_interval_s``, and at once when a job of its own ends) claims the due
deliveries (locking their rows, skipping rows another worker holds, and moving
``webhook_next_at`` past the attempt's timeout so no one else sends it meanwhile), posts
them with no transaction open, then records the outcome: delivered on a 2xx answer;
otherwise retried after ``backoff_s``, doubling up to an hour, until ``max_attempts``
have failed, when it is given up with the last error kept on the job.

Unless ``webhooks.allow_private_networks`` is set, a URL is refused at submission when
its host is a non-public address, and a delivery is refused when the host resolves to
one (a tenant must not make the workers call internal services). The address checked
is the one resolved before connecting; a name that resolves differently between the two
(DNS rebinding) is not caught: put an egress proxy in front of the workers where that
matters.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
from standardwebhooks import Webhook

from hsearch.config import WebhookSettings
from hsearch.db.base import utcnow
from hsearch.db.engine import SessionFactory, transaction
from hsearch.db.models import IngestionJob
from hsearch.db.repositories.jobs import JobRepository
from hsearch.errors import InvalidRequestError
from hsearch.ingestion.storable import unstorable
from hsearch.types import SEARCHABLE_JOB_STATUSES

__all__ = ["EVENT_TYPE", "WebhookSender", "check_webhook_url", "job_event"]

logger = logging.getLogger(__name__)

EVENT_TYPE = "job.finished"
MAX_BACKOFF = timedelta(hours=1)

Resolver = Callable[[str], list[str]]
"""A host name to the addresses it resolves to."""


def resolve_host(host: str) -> list[str]:
    return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None)})


def check_webhook_url(url: str, *, settings: WebhookSettings) -> str:
    """``url`` if webhooks are configured and it is an absolute http(s) URL (with a
    public address if it names one); raises InvalidRequestError naming ``webhook_url``."""
    if settings.secret is None:
        msg = (
            "webhook_url: this server sends no webhooks (no signing secret is set: "
            "HSEARCH_WEBHOOKS__SECRET)"
        )
        raise InvalidRequestError(msg)
    problems = list(unstorable(url, "webhook_url"))
    if problems:
        raise InvalidRequestError.of(problems)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequestError("webhook_url: an absolute http:// or https:// URL is required")
    if parts.username or parts.password:
        raise InvalidRequestError("webhook_url: credentials in the URL are not accepted")
    if len(url) > 2048:
        raise InvalidRequestError("webhook_url: at most 2048 characters")
    if not settings.allow_private_networks and _is_private(parts.hostname):
        msg = f"webhook_url: {parts.hostname} is not a public address"
        raise InvalidRequestError(msg)
    return url


def _is_private(host: str) -> bool:
    """Whether ``host`` is an address literal that is not global (loopback, private,
    link-local, ...). Names are checked when resolved, at delivery."""
    try:
        return not ipaddress.ip_address(host.strip("[]")).is_global
    except ValueError:
        return host.lower() == "localhost" or host.lower().endswith(".localhost")


def job_event(job: IngestionJob, *, now: datetime) -> dict[str, Any]:
    """The body a job's webhook carries."""
    searchable = job.status in SEARCHABLE_JOB_STATUSES
    return {
        "type": EVENT_TYPE,
        "timestamp": now.isoformat(),
        "data": {
            "job_id": str(job.id),
            "kind": job.kind.value,
            "status": job.status.value,
            "total": job.known_total,
            "indexed": job.indexed,
            "skipped": job.skipped,
            "failed": job.failed,
            "deleted": job.deleted,
            "error": job.error,
            "created_at": _iso(job.created_at),
            "finished_at": _iso(job.finished_at),
            "searchable_at": _iso(job.finished_at) if searchable else None,
            "status_url": f"/v1/jobs/{job.id}",
        },
    }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


@dataclass(frozen=True, slots=True)
class _Claimed:
    job_id: uuid.UUID
    url: str
    body: str
    attempt: int


class WebhookSender:
    """Delivers the webhooks that are due (see the module docstring)."""

    def __init__(
        self,
        sessions: SessionFactory,
        *,
        settings: WebhookSettings,
        client: httpx.Client | None = None,
        resolve: Resolver = resolve_host,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        if settings.secret is None:
            msg = "a webhook sender needs webhooks.secret"
            raise ValueError(msg)
        self._sessions = sessions
        self._settings = settings
        self._signer = Webhook(settings.secret.get_secret_value())
        self._client = client or httpx.Client(
            timeout=settings.timeout_s,
            follow_redirects=False,
            headers={"user-agent": "hsearch-webhooks"},
        )
        self._resolve = resolve
        self._clock = clock

    def deliver_due(self, *, limit: int = 20) -> int:
        """Attempt every due delivery once (up to ``limit``); returns how many were
        delivered."""
        claimed = self._claim(limit)
        delivered = 0
        for delivery in claimed:
            error = self._post(delivery)
            self._record(delivery, error)
            delivered += error is None
        return delivered

    def close(self) -> None:
        self._client.close()

    def _claim(self, limit: int) -> list[_Claimed]:
        now = self._clock()
        # No other sender takes a claimed delivery before this attempt has timed out.
        hold = timedelta(seconds=2 * self._settings.timeout_s + 5)
        claimed: list[_Claimed] = []
        with transaction(self._sessions) as session:
            for job in JobRepository(session).webhooks_due_all_tenants(
                now=now, max_attempts=self._settings.max_attempts, limit=limit
            ):
                if job.webhook_url is None:  # excluded by the query; kept for the type checker
                    continue
                job.webhook_attempts += 1
                job.webhook_next_at = now + hold
                body = json.dumps(job_event(job, now=now), separators=(",", ":"))
                claimed.append(_Claimed(job.id, job.webhook_url, body, job.webhook_attempts))
        return claimed

    def _post(self, delivery: _Claimed) -> str | None:
        """One attempt; returns the error, or None once delivered (a 2xx answer)."""
        host = urlsplit(delivery.url).hostname or ""
        if not self._settings.allow_private_networks:
            try:
                addresses = self._resolve(host)
            except OSError as exc:
                return f"cannot resolve {host}: {exc}"
            private = [a for a in addresses if not ipaddress.ip_address(a).is_global]
            if private:
                return f"{host} resolves to a non-public address ({private[0]}): not sent"
        now = self._clock()
        msg_id = str(delivery.job_id)
        headers = {
            "content-type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self._signer.sign(msg_id, now, delivery.body),
        }
        try:
            response = self._client.post(delivery.url, content=delivery.body, headers=headers)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        if not response.is_success:
            return f"HTTP {response.status_code}"
        return None

    def _record(self, delivery: _Claimed, error: str | None) -> None:
        now = self._clock()
        with transaction(self._sessions) as session:
            job = JobRepository(session).get_any_tenant(delivery.job_id)
            if job is None:  # purged meanwhile
                return
            if error is None:
                job.webhook_delivered_at = now
                job.webhook_next_at = None
                job.webhook_error = None
                logger.info(
                    "ingest.webhook.delivered job_id=%s attempt=%d", job.id, delivery.attempt
                )
            elif delivery.attempt >= self._settings.max_attempts:
                job.webhook_next_at = None
                job.webhook_error = f"given up after {delivery.attempt} attempts: {error}"
                logger.warning("ingest.webhook.given_up job_id=%s error=%s", job.id, error)
            else:
                wait = timedelta(seconds=self._settings.backoff_s) * 2 ** (delivery.attempt - 1)
                job.webhook_next_at = now + min(wait, MAX_BACKOFF)
                job.webhook_error = error
                logger.warning(
                    "ingest.webhook.failed job_id=%s attempt=%d error=%s: retried at %s",
                    job.id,
                    delivery.attempt,
                    error,
                    job.webhook_next_at.isoformat(),
                )
