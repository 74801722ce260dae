"""The one error hierarchy of hsearch.

Every error the domain raises on purpose derives from :class:`HsearchError` and
carries the HTTP status the API answers with and a stable machine-readable
``code``. The API renders all of them as ``{"error": code, "detail": message}``, with
``"errors": [{"field", "message", "line"?}]`` when an InvalidRequestError lists fields.

    HsearchError                      500 internal_error
    ├── InvalidRequestError           422 invalid_request       (``errors``: the fields, when known)
    │   ├── PayloadTooLargeError      413 payload_too_large
    │   ├── UnsupportedMediaTypeError 415 unsupported_media_type
    │   ├── InvalidFilterError        422 invalid_filter
    │   ├── InvalidFusionError        422 invalid_fusion
    │   ├── InvalidGraphError         422 invalid_graph         (a link graph or a graph query)
    │   └── TenantRequiredError       422 tenant_required       (an operator named no tenant)
    ├── AuthenticationError           401 unauthenticated       (no credential: WWW-Authenticate)
    │   ├── InvalidCredentialError    401 invalid_api_key       (malformed, unknown, wrong secret)
    │   ├── ExpiredCredentialError    401 api_key_expired
    │   ├── RevokedCredentialError    401 api_key_revoked       (also a token of a revoked key)
    │   ├── InvalidTokenError         401 invalid_token         (a forged or altered search token)
    │   ├── ExpiredTokenError         401 token_expired
    │   └── SessionRequiredError      401 session_required      (the pages: no valid session cookie)
    ├── PermissionDeniedError         403 forbidden
    │   ├── TenantSuspendedError      403 tenant_suspended
    │   ├── InsufficientScopeError    403 insufficient_scope    (``required``: the scopes accepted)
    │   ├── TenantMismatchError       403 tenant_mismatch       (a tenant key naming another tenant)
    │   ├── OperatorRequiredError     403 operator_required     (the pages: operators only)
    │   └── CsrfError                 403 csrf_failed           (a page POST without its token)
    ├── NotFoundError                 404 not_found
    │   ├── JobNotFoundError          404 job_not_found
    │   ├── DocumentNotFoundError     404 document_not_found
    │   ├── TenantNotFoundError       404 tenant_not_found
    │   ├── CommunityNotFoundError    404 community_not_found
    │   └── ApiKeyNotFoundError       404 api_key_not_found     (also another tenant's key)
    ├── JobFinishedError              409 job_finished
    ├── TenantExistsError             409 tenant_exists         (``field``: id or name)
    ├── QuotaExceededError            429 quota_exceeded        (``quota``, ``retry_after_s``)
    ├── RateLimitedError              429 rate_limited          (``retry_after``: seconds)
    ├── ConfigurationError            500 configuration_error
    │   ├── EncoderMismatchError      409 encoder_mismatch
    │   ├── CollectionSchemaError     409 collection_schema_mismatch
    │   └── DataDirectoryMismatchError  409 data_directory_mismatch  (another database's data)
    ├── EncoderError                  500 encoder_error
    ├── ReindexError                  409 reindex_refused       (the live collection is untouched)
    └── BackendError                  503 backend_unavailable   (transient: retried by workers)
        ├── VectorStoreError          503 vector_store_unavailable
        │   └── VectorStoreTimeoutError  503 vector_store_timeout   (the call's deadline fired)
        ├── SearchUnavailableError    503 search_unavailable    (every search leg failed)
        ├── CacheUnavailableError     503 cache_unavailable     (never sent: the cache is bypassed)
        ├── MetadataUnavailableError  503 metadata_unavailable  (database down: ``retry_after``)
        ├── GraphUnavailableError     503 graph_unavailable     (the graph leg degrades)
        ├── ConceptsUnavailableError  503 concepts_unavailable  (the Level 1 index is not ready)
        ├── ModelError                503 model_unavailable     (the model failed: answers degrade)
        │   └── ModelTimeoutError     503 model_timeout         (no token, or no end, in time)
        └── OverloadedError           503 overloaded            (``retry_after``: seconds)

Errors with a ``retry_after`` are answered with a ``Retry-After`` header.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Self


class HsearchError(Exception):
    """Root of every error hsearch raises deliberately."""

    status_code: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class FieldError:
    """One invalid field of a request: which, and what is wrong with it.

    ``line`` is the line of an NDJSON upload the field is on (1-based, as editors count);
    ``field`` is then the path inside that line's document (``tags[0]``, or empty when
    the line as a whole is wrong: not JSON, not an object)."""

    field: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = [f"line {self.line}"] if self.line is not None else []
        where += [self.field] if self.field else []
        return ": ".join([*where, self.message])


class InvalidRequestError(HsearchError):
    """The caller sent something we cannot act on; the message names the field.

    ``errors`` lists the fields one by one when there may be several (a batch of
    documents, an upload's lines): the API renders them as ``errors`` beside ``detail``,
    so a client can tell which documents to fix without parsing the message."""

    status_code = 422
    code = "invalid_request"

    def __init__(self, message: str, *, errors: Sequence[FieldError] = ()) -> None:
        super().__init__(message)
        self.errors = tuple(errors)

    @classmethod
    def of(cls, errors: Sequence[FieldError], *, shown: int = 20) -> Self:
        """One error for ``errors`` (at least one), its message naming the first
        ``shown`` of them."""
        detail = "; ".join(str(e) for e in errors[:shown])
        if len(errors) > shown:
            detail += f"; and {len(errors) - shown} more"
        return cls(detail, errors=errors)


class PayloadTooLargeError(InvalidRequestError):
    """A request, a batch or a document over a size limit; the message names the limit."""

    status_code = 413
    code = "payload_too_large"


class UnsupportedMediaTypeError(InvalidRequestError):
    """A body in a format the endpoint does not read; the message names the one it does."""

    status_code = 415
    code = "unsupported_media_type"


class InvalidFilterError(InvalidRequestError):
    code = "invalid_filter"


class InvalidFusionError(InvalidRequestError):
    code = "invalid_fusion"


class InvalidGraphError(InvalidRequestError):
    """A link graph that cannot be built (edges out of range, bad weights) or a graph
    query that cannot be run (depth, limit, seeds, walk parameters); the message names
    what is allowed."""

    code = "invalid_graph"


class TenantRequiredError(InvalidRequestError):
    """An operator credential acts for a tenant it names per request
    (``X-Hsearch-Tenant``); this request named none."""

    code = "tenant_required"


class AuthenticationError(HsearchError):
    """The request carries no usable credential: the API answers 401 with
    ``WWW-Authenticate: Bearer``. The message never repeats the credential."""

    status_code = 401
    code = "unauthenticated"


class InvalidCredentialError(AuthenticationError):
    """Not a key this service issued: malformed, unknown prefix, or a wrong secret (one
    answer for all three, so a caller learns nothing about which prefixes exist)."""

    code = "invalid_api_key"


class ExpiredCredentialError(AuthenticationError):
    """A genuine key past its ``expires_at``."""

    code = "api_key_expired"


class RevokedCredentialError(AuthenticationError):
    """A genuine key that was revoked."""

    code = "api_key_revoked"


class InvalidTokenError(AuthenticationError):
    """Not a search token this service minted, or altered since (one answer for every
    failed check, so a forger learns nothing)."""

    code = "invalid_token"


class ExpiredTokenError(AuthenticationError):
    """A genuine search token past its ``exp``."""

    code = "token_expired"


class SessionRequiredError(AuthenticationError):
    """A request of the built-in pages (``/ops``, ``/playground``) without a valid
    operator session cookie: none, tampered with, expired, or its credential revoked."""

    code = "session_required"


class PermissionDeniedError(HsearchError):
    """The caller is known but may not do this."""

    status_code = 403
    code = "forbidden"


class TenantSuspendedError(PermissionDeniedError):
    """The key's tenant is suspended: its credentials are refused until it is resumed."""

    code = "tenant_suspended"


class InsufficientScopeError(PermissionDeniedError):
    """The key holds none of the scopes the route accepts (``required``)."""

    code = "insufficient_scope"

    def __init__(self, message: str, *, required: Sequence[str]) -> None:
        super().__init__(message)
        self.required = tuple(required)


class TenantMismatchError(PermissionDeniedError):
    """A tenant's key named another tenant (``X-Hsearch-Tenant`` is for operators)."""

    code = "tenant_mismatch"


class OperatorRequiredError(PermissionDeniedError):
    """The pages' login takes an operator credential (``hso_...``); a tenant key is refused."""

    code = "operator_required"


class CsrfError(PermissionDeniedError):
    """A state-changing request of the pages whose ``X-CSRF-Token`` header is missing or
    is not the token of its session (or, at login, of its CSRF cookie)."""

    code = "csrf_failed"


class NotFoundError(HsearchError):
    status_code = 404
    code = "not_found"


class JobNotFoundError(NotFoundError):
    code = "job_not_found"


class DocumentNotFoundError(NotFoundError):
    code = "document_not_found"


class TenantNotFoundError(NotFoundError):
    code = "tenant_not_found"


class CommunityNotFoundError(NotFoundError):
    code = "community_not_found"


class ApiKeyNotFoundError(NotFoundError):
    """No such key, or one of another tenant (the same answer: ids do not leak)."""

    code = "api_key_not_found"


class TenantExistsError(HsearchError):
    """A tenant's id or name is taken: ``field`` says which (``"id"`` or ``"name"``)."""

    status_code = 409
    code = "tenant_exists"

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class QuotaExceededError(HsearchError):
    """A tenant's quota (settings ``quotas``) would be exceeded: ``quota`` names it;
    ``retry_after_s``, when set, is when trying again can succeed (``Retry-After``)."""

    status_code = 429
    code = "quota_exceeded"

    def __init__(self, message: str, *, quota: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.quota = quota
        self.retry_after_s = retry_after_s


class DocumentPendingError(HsearchError):
    """The document is not indexed yet, only submitted in a job that has not finished:
    what changes an indexed document cannot change it."""

    status_code = 409
    code = "document_pending"


class JobFinishedError(HsearchError):
    """The job has finished: there is nothing left to cancel."""

    status_code = 409
    code = "job_finished"


class RateLimitedError(HsearchError):
    """A key made more requests than its rate limit allows; the message names the limit
    and the setting, ``retry_after`` says when the next one may pass (whole seconds)."""

    status_code = 429
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ConfigurationError(HsearchError):
    code = "configuration_error"


class EncoderMismatchError(ConfigurationError):
    """The collection was built with another encoder than the one configured."""

    status_code = 409
    code = "encoder_mismatch"


class DataDirectoryMismatchError(ConfigurationError):
    """The data directory's vector data belongs to another metadata database than the
    one configured (:mod:`hsearch.ingestion.operations.datadir`)."""

    status_code = 409
    code = "data_directory_mismatch"


class CollectionSchemaError(ConfigurationError):
    """The collection was built by an hsearch whose chunk fields differ (an older schema
    version): ``hsearch reindex`` rebuilds it."""

    status_code = 409
    code = "collection_schema_mismatch"


class EncoderError(HsearchError):
    code = "encoder_error"


class ReindexError(HsearchError):
    """A rebuild (``hsearch reindex``) cannot finish as asked: ingestion is running,
    documents changed under it, or some failed to encode. The live collection and the
    statistics are left as they were."""

    status_code = 409
    code = "reindex_refused"


class BackendError(HsearchError):
    """A backing service (Milvus, database, broker) failed or timed out: transient."""

    status_code = 503
    code = "backend_unavailable"


class VectorStoreError(BackendError):
    code = "vector_store_unavailable"


class VectorStoreTimeoutError(VectorStoreError):
    """The store gave no answer before the call's deadline: a search leg that raises it
    is reported ``timeout``, not ``error``."""

    code = "vector_store_timeout"


class SearchUnavailableError(BackendError):
    code = "search_unavailable"


class CacheUnavailableError(BackendError):
    """The cache's store (Redis) failed or timed out. Caches catch it and are bypassed
    (:mod:`hsearch.cache.guard`): a search never fails because of its cache."""

    code = "cache_unavailable"


class GraphUnavailableError(BackendError):
    """A tenant's document graph could not be read or built in time, or holds more
    links than ``graph.max_links``: the graph leg is degraded, the search goes on."""

    code = "graph_unavailable"


class ConceptsUnavailableError(BackendError):
    """A tenant's concept index (the Level 1 index of lazy search) could not be read or
    built in time."""

    code = "concepts_unavailable"


class MetadataUnavailableError(BackendError):
    """The metadata database cannot be reached (refused, timed out, dropped the
    connection): nothing was written. A search still answers from what this process
    read within ``database.stale_s`` (credentials: ``auth.stale_ttl_s``); a write, or a
    credential not verified within that window, is refused with this error, to be
    retried after ``retry_after`` seconds."""

    code = "metadata_unavailable"

    def __init__(self, message: str, *, retry_after: int = 5) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ModelError(BackendError):
    """The language model's endpoint failed (refused, broke off, answered an error).
    An answer never fails with it: it returns the passages with ``answer: null`` and
    the reason (docs/answers.md)."""

    code = "model_unavailable"


class ModelTimeoutError(ModelError):
    """The model sent no first token, or did not finish, within its time."""

    code = "model_timeout"


class ConcurrentWriteError(BackendError):
    """Another transaction wrote the same new row first (two workers inserting one new
    document, on Postgres, where the second waits for the first and then finds its row
    taken): nothing of this transaction was written, and a retry sees the row."""

    code = "concurrent_write"


class OverloadedError(BackendError):
    """The process already runs as many searches as it may (``api.max_concurrent_searches``):
    refused at once rather than queued, so a client retries after ``retry_after`` seconds
    (or on another process) instead of waiting without end."""

    code = "overloaded"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after
