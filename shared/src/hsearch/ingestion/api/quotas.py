"""A tenant's quotas (settings ``quotas``), checked when a job is submitted.

Both are counted from the metadata database in the submitting transaction, under a
lock on the tenant's row, so every API process enforces the same numbers and two
concurrent submissions of one tenant cannot both slip under a quota:

* ``quotas.max_documents``: distinct documents the tenant holds, indexed or pending in
  an unfinished job, plus the batch's new ones (a new version of a held document adds
  none). Over it: 429 ``quota_exceeded`` naming the quota, no Retry-After (deleting
  documents is what frees room).
* ``quotas.ingest_documents_per_minute``: documents submitted in the last 60 s (a
  sliding window over the tenant's ingest jobs). Over it: 429 ``quota_exceeded`` with
  ``Retry-After``, the seconds until enough of the window has passed for this batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from hsearch.config import QuotaSettings
from hsearch.db.engine import Session
from hsearch.db.repositories.quotas import QuotaRepository
from hsearch.errors import QuotaExceededError

__all__ = ["WINDOW", "check_submission"]

WINDOW = timedelta(seconds=60)
MAX_DOCUMENTS = "quotas.max_documents"
INGEST_RATE = "quotas.ingest_documents_per_minute"


def check_submission(
    session: Session,
    *,
    tenant_id: str,
    external_ids: Sequence[str],
    quotas: QuotaSettings,
    now: datetime,
) -> None:
    """Raise QuotaExceededError (429) if submitting ``external_ids`` would pass a quota."""
    if not (quotas.max_documents or quotas.ingest_documents_per_minute):
        return
    repo = QuotaRepository(session)
    repo.lock_tenant(tenant_id)
    batch = len(external_ids)
    limit = quotas.ingest_documents_per_minute
    if limit:
        if batch > limit:
            msg = (
                f"{INGEST_RATE}: a batch of {batch} documents is more than the {limit} a "
                "tenant may submit per minute; send smaller batches"
            )
            raise QuotaExceededError(msg, quota=INGEST_RATE)
        recent = repo.submitted_since(tenant_id, now - WINDOW)
        submitted = sum(n for _, n in recent)
        if submitted + batch > limit:
            wait = _retry_after(recent, excess=submitted + batch - limit, now=now)
            msg = (
                f"{INGEST_RATE}: {submitted} documents submitted in the last 60 s; "
                f"{batch} more would pass the quota of {limit} per minute"
            )
            raise QuotaExceededError(msg, quota=INGEST_RATE, retry_after_s=wait)
    cap = quotas.max_documents
    if cap:
        unique = set(external_ids)
        held = repo.documents_held(tenant_id)
        new = len(unique) - repo.already_held(tenant_id, unique)
        if held + new > cap:
            msg = (
                f"{MAX_DOCUMENTS}: the tenant holds {held} documents; {new} new ones would "
                f"pass the quota of {cap} (delete documents to make room)"
            )
            raise QuotaExceededError(msg, quota=MAX_DOCUMENTS)


def _retry_after(recent: Sequence[tuple[datetime, int]], *, excess: int, now: datetime) -> float:
    """Seconds until the oldest submissions holding at least ``excess`` documents have
    left the window."""
    freed = 0
    for created, n in recent:
        freed += n
        if freed >= excess:
            leaves = _aware(created) + WINDOW
            return max(1.0, (leaves - now).total_seconds())
    return WINDOW.total_seconds()


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
