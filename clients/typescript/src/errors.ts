/**
 * The client's errors: one class per stable `error` code of the API (docs/api.md,
 * Errors), grouped by HTTP status, and the errors of no usable answer. The same tree
 * and the same code-to-class mapping as the Python client (`hsearch_client.errors`; a
 * test of the repository compares the two).
 *
 *     ClientError
 *     ├── ApiError                    the API answered with an error: status, code, detail, errors
 *     │   ├── BadRequestError         400 (cors_refused)
 *     │   ├── AuthenticationError     401 unauthenticated
 *     │   │   ├── InvalidApiKeyError     invalid_api_key
 *     │   │   ├── ApiKeyExpiredError     api_key_expired
 *     │   │   ├── ApiKeyRevokedError     api_key_revoked
 *     │   │   ├── InvalidTokenError      invalid_token
 *     │   │   └── TokenExpiredError      token_expired
 *     │   ├── PermissionDeniedError   403 forbidden
 *     │   │   ├── InsufficientScopeError insufficient_scope
 *     │   │   ├── TenantSuspendedError   tenant_suspended
 *     │   │   └── TenantMismatchError    tenant_mismatch
 *     │   ├── NotFoundError           404 not_found
 *     │   │   ├── DocumentNotFoundError  document_not_found
 *     │   │   ├── JobNotFoundError       job_not_found
 *     │   │   ├── ApiKeyNotFoundError    api_key_not_found
 *     │   │   └── TenantNotFoundError    tenant_not_found
 *     │   ├── MethodNotAllowedError   405 method_not_allowed
 *     │   ├── ConflictError           409
 *     │   │   ├── JobFinishedError       job_finished
 *     │   │   └── DocumentPendingError   document_pending
 *     │   ├── PayloadTooLargeError    413 payload_too_large
 *     │   ├── UnsupportedMediaTypeError 415 unsupported_media_type
 *     │   ├── InvalidRequestError     422 invalid_request
 *     │   │   ├── InvalidFilterError     invalid_filter
 *     │   │   ├── InvalidFusionError     invalid_fusion
 *     │   │   └── TenantRequiredError    tenant_required
 *     │   ├── TooManyRequestsError    429 (`retryAfter`)
 *     │   │   ├── RateLimitedError       rate_limited
 *     │   │   └── QuotaExceededError     quota_exceeded
 *     │   ├── ServerError             500 internal_error, encoder_error, configuration_error
 *     │   └── ServiceUnavailableError 502, 503, 504 (also an ApiUnavailableError; `retryAfter`)
 *     │       ├── OverloadedError        overloaded
 *     │       ├── MetadataUnavailableError metadata_unavailable
 *     │       └── SearchUnavailableError search_unavailable (every search leg failed)
 *     ├── ApiUnavailableError         no usable answer after the retries
 *     │   ├── ConnectionFailedError   no answer at all: refused, reset, timed out
 *     │   └── ServiceUnavailableError (above)
 *     └── ResponseFormatError         a successful status whose body is not the API's
 *
 * A code this version does not know is thrown as the class of its status (the API may
 * add codes within `/v1`; branch on `code`, never on `detail`).
 */

/** One invalid field of a refused request (the body's `errors`). */
export interface FieldError {
  /** Its path in the request (`documents[0].tags[1]`, `top_k`; `request` for the whole). */
  readonly field: string;
  readonly message: string;
  /** The NDJSON line (1-based) when an upload names one. */
  readonly line: number | null;
}

/** Root of every error the client throws. */
export class ClientError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A successful status whose body is not what the API sends (a proxy's page, or a
 * server that is not hsearch). */
export class ResponseFormatError extends ClientError {}

export interface ApiErrorInit {
  readonly errors?: readonly FieldError[];
  /** Seconds a 429 or a 503 asked to wait. */
  readonly retryAfter?: number | null;
  /** The message, when not `"{status} {code}: {detail}"`. */
  readonly message?: string;
}

/** The API answered with an error body: its HTTP `status`, the stable `code` (the
 * body's `error`), the `detail` for people and, for an invalid request, the fields
 * one by one (`errors`). `retryAfter` is the wait a 429 or 503 asked for, in seconds. */
export class ApiError extends ClientError {
  /** The status of the class (0: any); an instance's own is `status`. */
  static readonly statusCode: number = 0;
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly errors: readonly FieldError[];
  readonly retryAfter: number | null;

  constructor(status: number, code: string, detail: string, init: ApiErrorInit = {}) {
    super(init.message ?? `${status} ${code}: ${detail}`);
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.errors = init.errors ?? [];
    this.retryAfter = init.retryAfter ?? null;
  }
}

/** No usable answer after the retries: the API is down, unreachable, or keeps
 * answering 502, 503 or 504 (those are a {@link ServiceUnavailableError}, which is
 * also an `ApiError` with the code: `instanceof ApiUnavailableError` holds for it). */
export class ApiUnavailableError extends ClientError {
  static override [Symbol.hasInstance](value: unknown): boolean {
    // ServiceUnavailableError is an ApiError first (one prototype chain); it is also
    // one of these, as in the Python client's tree.
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true;
    return this === ApiUnavailableError && value instanceof ServiceUnavailableError;
  }
}

/** No answer at all: the connection was refused or broke, or the request timed out. */
export class ConnectionFailedError extends ApiUnavailableError {}

export class BadRequestError extends ApiError {
  static override readonly statusCode: number = 400;
}

/** No credential, or one that is malformed, unknown, expired or revoked. */
export class AuthenticationError extends ApiError {
  static override readonly statusCode: number = 401;
}
export class InvalidApiKeyError extends AuthenticationError {}
export class ApiKeyExpiredError extends AuthenticationError {}
export class ApiKeyRevokedError extends AuthenticationError {}
export class InvalidTokenError extends AuthenticationError {}
export class TokenExpiredError extends AuthenticationError {}

/** The credential may not do this: a scope it lacks, a suspended tenant. */
export class PermissionDeniedError extends ApiError {
  static override readonly statusCode: number = 403;
}
export class InsufficientScopeError extends PermissionDeniedError {}
export class TenantSuspendedError extends PermissionDeniedError {}
export class TenantMismatchError extends PermissionDeniedError {}

/** No such resource for this tenant (another tenant's answers the same). */
export class NotFoundError extends ApiError {
  static override readonly statusCode: number = 404;
}
export class DocumentNotFoundError extends NotFoundError {}
export class JobNotFoundError extends NotFoundError {}
export class ApiKeyNotFoundError extends NotFoundError {}
export class TenantNotFoundError extends NotFoundError {}

export class MethodNotAllowedError extends ApiError {
  static override readonly statusCode: number = 405;
}

/** The resource's state forbids it. */
export class ConflictError extends ApiError {
  static override readonly statusCode: number = 409;
}
export class JobFinishedError extends ConflictError {}
export class DocumentPendingError extends ConflictError {}

export class PayloadTooLargeError extends ApiError {
  static override readonly statusCode: number = 413;
}

export class UnsupportedMediaTypeError extends ApiError {
  static override readonly statusCode: number = 415;
}

/** A field is invalid or out of bounds: `errors` names each. */
export class InvalidRequestError extends ApiError {
  static override readonly statusCode: number = 422;
}
export class InvalidFilterError extends InvalidRequestError {}
export class InvalidFusionError extends InvalidRequestError {}
export class TenantRequiredError extends InvalidRequestError {}

/** A 429: the key's rate limit (`rate_limited`) or a tenant's quota
 * (`quota_exceeded`); `retryAfter` when a wait lifts it. Thrown once the retries are
 * spent, or at once when no wait is named. */
export class TooManyRequestsError extends ApiError {
  static override readonly statusCode: number = 429;
}
export class RateLimitedError extends TooManyRequestsError {}
export class QuotaExceededError extends TooManyRequestsError {}

/** An unexpected error on the server, a failed encoder, or a misconfigured server. */
export class ServerError extends ApiError {
  static override readonly statusCode: number = 500;
}

/** A 502, 503 or 504 after the retries: a backing service down, or the process at
 * its search capacity (`overloaded`). Transient. */
export class ServiceUnavailableError extends ApiError {
  static override readonly statusCode: number = 503;
}
export class OverloadedError extends ServiceUnavailableError {}
export class MetadataUnavailableError extends ServiceUnavailableError {}
export class SearchUnavailableError extends ServiceUnavailableError {}

export type ApiErrorClass = (new (
  status: number,
  code: string,
  detail: string,
  init?: ApiErrorInit,
) => ApiError) & { readonly statusCode: number };

/** An answer from a proxy or a server that cannot serve now: tried again. */
export const UNAVAILABLE_STATUSES: ReadonlySet<number> = new Set([502, 503, 504]);

/** The class of each stable code (docs/api.md, Errors). */
export const ERROR_CLASSES: Readonly<Record<string, ApiErrorClass>> = {
  cors_refused: BadRequestError,
  unauthenticated: AuthenticationError,
  invalid_api_key: InvalidApiKeyError,
  api_key_expired: ApiKeyExpiredError,
  api_key_revoked: ApiKeyRevokedError,
  invalid_token: InvalidTokenError,
  token_expired: TokenExpiredError,
  forbidden: PermissionDeniedError,
  insufficient_scope: InsufficientScopeError,
  tenant_suspended: TenantSuspendedError,
  tenant_mismatch: TenantMismatchError,
  not_found: NotFoundError,
  document_not_found: DocumentNotFoundError,
  job_not_found: JobNotFoundError,
  api_key_not_found: ApiKeyNotFoundError,
  tenant_not_found: TenantNotFoundError,
  method_not_allowed: MethodNotAllowedError,
  job_finished: JobFinishedError,
  document_pending: DocumentPendingError,
  payload_too_large: PayloadTooLargeError,
  unsupported_media_type: UnsupportedMediaTypeError,
  invalid_request: InvalidRequestError,
  invalid_filter: InvalidFilterError,
  invalid_fusion: InvalidFusionError,
  tenant_required: TenantRequiredError,
  rate_limited: RateLimitedError,
  quota_exceeded: QuotaExceededError,
  overloaded: OverloadedError,
  metadata_unavailable: MetadataUnavailableError,
  search_unavailable: SearchUnavailableError,
};

const BY_STATUS: ReadonlyMap<number, ApiErrorClass> = new Map<number, ApiErrorClass>([
  [400, BadRequestError],
  [401, AuthenticationError],
  [403, PermissionDeniedError],
  [404, NotFoundError],
  [405, MethodNotAllowedError],
  [409, ConflictError],
  [413, PayloadTooLargeError],
  [415, UnsupportedMediaTypeError],
  [422, InvalidRequestError],
  [429, TooManyRequestsError],
  [500, ServerError],
  [502, ServiceUnavailableError],
  [503, ServiceUnavailableError],
  [504, ServiceUnavailableError],
]);

/** The class thrown for an error answer: the code's own when this version knows it
 * and it agrees with the status, else the status's, else {@link ApiError}. */
export function errorFor(status: number, code: string): ApiErrorClass {
  const byCode = Object.hasOwn(ERROR_CLASSES, code) ? ERROR_CLASSES[code] : undefined;
  const unavailable = UNAVAILABLE_STATUSES.has(status);
  if (
    byCode !== undefined &&
    (byCode.statusCode === status || (unavailable && byCode.statusCode === 503))
  ) {
    return byCode;
  }
  const byStatus = BY_STATUS.get(status);
  if (byStatus !== undefined) return byStatus;
  return status >= 500 ? ServerError : ApiError;
}
