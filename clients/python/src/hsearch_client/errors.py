"""The client's errors: one class per stable ``error`` code of the API (docs/api.md,
Errors), grouped by HTTP status, and the errors of no usable answer.

    ClientError
    ├── ApiError                    the API answered with an error: status, code, detail, errors
    │   ├── BadRequestError         400 (cors_refused)
    │   ├── AuthenticationError     401 unauthenticated
    │   │   ├── InvalidApiKeyError     invalid_api_key
    │   │   ├── ApiKeyExpiredError     api_key_expired
    │   │   ├── ApiKeyRevokedError     api_key_revoked
    │   │   ├── InvalidTokenError      invalid_token
    │   │   └── TokenExpiredError      token_expired
    │   ├── PermissionDeniedError   403 forbidden
    │   │   ├── InsufficientScopeError insufficient_scope
    │   │   ├── TenantSuspendedError   tenant_suspended
    │   │   └── TenantMismatchError    tenant_mismatch
    │   ├── NotFoundError           404 not_found
    │   │   ├── DocumentNotFoundError  document_not_found
    │   │   ├── JobNotFoundError       job_not_found
    │   │   ├── ApiKeyNotFoundError    api_key_not_found
    │   │   └── TenantNotFoundError    tenant_not_found
    │   ├── MethodNotAllowedError   405 method_not_allowed
    │   ├── ConflictError           409
    │   │   ├── JobFinishedError       job_finished
    │   │   └── DocumentPendingError   document_pending
    │   ├── PayloadTooLargeError    413 payload_too_large
    │   ├── UnsupportedMediaTypeError 415 unsupported_media_type
    │   ├── InvalidRequestError     422 invalid_request
    │   │   ├── InvalidFilterError     invalid_filter
    │   │   ├── InvalidFusionError     invalid_fusion
    │   │   └── TenantRequiredError    tenant_required
    │   ├── TooManyRequestsError    429 (``retry_after``)
    │   │   ├── RateLimitedError       rate_limited
    │   │   └── QuotaExceededError     quota_exceeded
    │   ├── ServerError             500 internal_error, encoder_error, configuration_error
    │   └── ServiceUnavailableError 502, 503, 504 (also an ApiUnavailableError; ``retry_after``)
    │       ├── OverloadedError        overloaded
    │       ├── MetadataUnavailableError metadata_unavailable
    │       └── SearchUnavailableError search_unavailable (every search leg failed)
    └── ApiUnavailableError         no usable answer after the retries
        ├── ConnectionFailedError   no answer at all: refused, reset, timed out
        └── ServiceUnavailableError (above)

A code this version does not know is raised as the class of its status (the API may add
codes within ``/v1``; branch on ``code``, never on ``detail``). ``ClientError`` is also
what an answer that is not the API's JSON raises (:class:`ResponseFormatError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ApiError",
    "ApiKeyExpiredError",
    "ApiKeyNotFoundError",
    "ApiKeyRevokedError",
    "ApiUnavailableError",
    "AuthenticationError",
    "BadRequestError",
    "ClientError",
    "ConflictError",
    "ConnectionFailedError",
    "DocumentNotFoundError",
    "DocumentPendingError",
    "FieldError",
    "InsufficientScopeError",
    "InvalidApiKeyError",
    "InvalidFilterError",
    "InvalidFusionError",
    "InvalidRequestError",
    "InvalidTokenError",
    "JobFinishedError",
    "JobNotFoundError",
    "MetadataUnavailableError",
    "MethodNotAllowedError",
    "NotFoundError",
    "OverloadedError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "QuotaExceededError",
    "RateLimitedError",
    "ResponseFormatError",
    "SearchUnavailableError",
    "ServerError",
    "ServiceUnavailableError",
    "TenantMismatchError",
    "TenantNotFoundError",
    "TenantRequiredError",
    "TenantSuspendedError",
    "TokenExpiredError",
    "TooManyRequestsError",
    "UnsupportedMediaTypeError",
    "error_for",
]


@dataclass(frozen=True, slots=True)
class FieldError:
    """One invalid field of a refused request (the body's ``errors``): its path in the
    request (``documents[0].tags[1]``, ``top_k``; ``request`` for the whole), the
    message, and the NDJSON line (1-based) when an upload names one."""

    field: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = [f"line {self.line}"] if self.line is not None else []
        where += [self.field] if self.field else []
        return ": ".join([*where, self.message])


class ClientError(Exception):
    """Root of every error the client raises."""


class ResponseFormatError(ClientError):
    """A successful status whose body is not what the API sends (not JSON, or not of
    the expected shape): a proxy's page, or a server that is not hsearch."""


class ApiError(ClientError):
    """The API answered with an error body: its HTTP ``status``, the stable ``code``
    (``error``), the ``detail`` for people and, for an invalid request, the fields one by
    one (``errors``). ``retry_after`` is the wait a 429 or 503 asked for, in seconds."""

    status_code: int = 0
    """The status of the class (0: any); an instance's own is ``status``."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        errors: Sequence[FieldError] = (),
        retry_after: float | None = None,
        message: str | None = None,
    ) -> None:
        super().__init__(message or f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.errors = tuple(errors)
        self.retry_after = retry_after


class ApiUnavailableError(ClientError):
    """No usable answer after the retries: the API is down, unreachable, or keeps
    answering 502, 503 or 504 (those are also an :class:`ApiError`, with the code)."""


class ConnectionFailedError(ApiUnavailableError):
    """No answer at all: the connection was refused or broke, or the request timed out."""


class BadRequestError(ApiError):
    status_code = 400


class AuthenticationError(ApiError):
    """No credential, or one that is malformed, unknown, expired or revoked."""

    status_code = 401


class InvalidApiKeyError(AuthenticationError):
    pass


class ApiKeyExpiredError(AuthenticationError):
    pass


class ApiKeyRevokedError(AuthenticationError):
    pass


class InvalidTokenError(AuthenticationError):
    pass


class TokenExpiredError(AuthenticationError):
    pass


class PermissionDeniedError(ApiError):
    """The credential may not do this: a scope it lacks, a suspended tenant."""

    status_code = 403


class InsufficientScopeError(PermissionDeniedError):
    pass


class TenantSuspendedError(PermissionDeniedError):
    pass


class TenantMismatchError(PermissionDeniedError):
    pass


class NotFoundError(ApiError):
    """No such resource for this tenant (another tenant's answers the same)."""

    status_code = 404


class DocumentNotFoundError(NotFoundError):
    pass


class JobNotFoundError(NotFoundError):
    pass


class ApiKeyNotFoundError(NotFoundError):
    pass


class TenantNotFoundError(NotFoundError):
    pass


class MethodNotAllowedError(ApiError):
    status_code = 405


class ConflictError(ApiError):
    """The resource's state forbids it."""

    status_code = 409


class JobFinishedError(ConflictError):
    pass


class DocumentPendingError(ConflictError):
    pass


class PayloadTooLargeError(ApiError):
    status_code = 413


class UnsupportedMediaTypeError(ApiError):
    status_code = 415


class InvalidRequestError(ApiError):
    """A field is invalid or out of bounds: ``errors`` names each."""

    status_code = 422


class InvalidFilterError(InvalidRequestError):
    pass


class InvalidFusionError(InvalidRequestError):
    pass


class TenantRequiredError(InvalidRequestError):
    pass


class TooManyRequestsError(ApiError):
    """A 429: the key's rate limit (``rate_limited``) or a tenant's quota
    (``quota_exceeded``); ``retry_after`` when a wait lifts it. Raised once the retries
    are spent, or at once when no wait is named."""

    status_code = 429


class RateLimitedError(TooManyRequestsError):
    pass


class QuotaExceededError(TooManyRequestsError):
    pass


class ServerError(ApiError):
    """An unexpected error on the server (the detail says nothing of the cause), a
    failed encoder, or a misconfigured server."""

    status_code = 500


class ServiceUnavailableError(ApiError, ApiUnavailableError):
    """A 502, 503 or 504 after the retries: a backing service down, or the process at
    its search capacity (``overloaded``). Transient."""

    status_code = 503


class OverloadedError(ServiceUnavailableError):
    pass


class MetadataUnavailableError(ServiceUnavailableError):
    pass


class SearchUnavailableError(ServiceUnavailableError):
    pass


UNAVAILABLE_STATUSES = frozenset({502, 503, 504})
"""An answer from a proxy or a server that cannot serve now: tried again."""

_BY_CODE: dict[str, type[ApiError]] = {
    "cors_refused": BadRequestError,
    "unauthenticated": AuthenticationError,
    "invalid_api_key": InvalidApiKeyError,
    "api_key_expired": ApiKeyExpiredError,
    "api_key_revoked": ApiKeyRevokedError,
    "invalid_token": InvalidTokenError,
    "token_expired": TokenExpiredError,
    "forbidden": PermissionDeniedError,
    "insufficient_scope": InsufficientScopeError,
    "tenant_suspended": TenantSuspendedError,
    "tenant_mismatch": TenantMismatchError,
    "not_found": NotFoundError,
    "document_not_found": DocumentNotFoundError,
    "job_not_found": JobNotFoundError,
    "api_key_not_found": ApiKeyNotFoundError,
    "tenant_not_found": TenantNotFoundError,
    "method_not_allowed": MethodNotAllowedError,
    "job_finished": JobFinishedError,
    "document_pending": DocumentPendingError,
    "payload_too_large": PayloadTooLargeError,
    "unsupported_media_type": UnsupportedMediaTypeError,
    "invalid_request": InvalidRequestError,
    "invalid_filter": InvalidFilterError,
    "invalid_fusion": InvalidFusionError,
    "tenant_required": TenantRequiredError,
    "rate_limited": RateLimitedError,
    "quota_exceeded": QuotaExceededError,
    "overloaded": OverloadedError,
    "metadata_unavailable": MetadataUnavailableError,
    "search_unavailable": SearchUnavailableError,
}
_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    413: PayloadTooLargeError,
    415: UnsupportedMediaTypeError,
    422: InvalidRequestError,
    429: TooManyRequestsError,
    500: ServerError,
    502: ServiceUnavailableError,
    503: ServiceUnavailableError,
    504: ServiceUnavailableError,
}


def error_for(status: int, code: str) -> type[ApiError]:
    """The class raised for an error answer: the code's own when this version knows it
    and it agrees with the status, else the status's, else :class:`ApiError`."""
    by_code = _BY_CODE.get(code)
    unavailable = status in UNAVAILABLE_STATUSES
    if by_code is not None and (
        by_code.status_code == status or (unavailable and by_code.status_code == 503)
    ):
        return by_code
    by_status = _BY_STATUS.get(status)
    if by_status is not None:
        return by_status
    if status >= 500:
        return ServerError
    return ApiError
