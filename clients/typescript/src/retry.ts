/**
 * When a request is tried again, and what an error answer is: the same decisions as
 * the Python client's (`hsearch_client._core`), in milliseconds. No I/O here.
 */

import {
  ApiError,
  ConnectionFailedError,
  type FieldError,
  ServiceUnavailableError,
  TooManyRequestsError,
  UNAVAILABLE_STATUSES,
  errorFor,
} from "./errors.js";

export const RATE_LIMITED = 429;
/** The shortest wait before another try: `Retry-After: 0` must not make a busy loop. */
export const MIN_PAUSE_MS = 500;
/** How the API's 429 detail names the wait, for a proxy that drops the header. */
const RETRY_AFTER_DETAIL = /retry after (\d+(?:\.\d+)?) s/;

/**
 * When a request is tried again, and for how long.
 *
 * A connection that fails (or times out), a 502/503/504 and a 429 may pass another
 * time; any other error is thrown at once. Between tries the client waits what the
 * answer's `Retry-After` asks (a 429 that names no wait is a quota no wait lifts:
 * thrown at once), else doubling pauses from 0.5 s up to `maxPauseMs`. It tries at
 * most `retries` times more or, with `retryForMs`, for as long as that since the first
 * failure; a `Retry-After` longer than `maxRetryAfterMs` (a daily quota) is not waited
 * for without `retryForMs`.
 */
export interface RetryOptions {
  /** More tries after the first (default 3; 0: none). */
  readonly retries?: number;
  /** Try for this long since the first failure instead of counting tries. */
  readonly retryForMs?: number;
  /** The longest pause of the backoff (default 10 s). */
  readonly maxPauseMs?: number;
  /** The longest `Retry-After` waited for (default 60 s). */
  readonly maxRetryAfterMs?: number;
}

export interface Retry {
  readonly retries: number;
  readonly retryForMs: number | null;
  readonly maxPauseMs: number;
  readonly maxRetryAfterMs: number;
}

export function retryOf(options: RetryOptions = {}): Retry {
  return {
    retries: options.retries ?? 3,
    retryForMs: options.retryForMs ?? null,
    maxPauseMs: options.maxPauseMs ?? 10_000,
    maxRetryAfterMs: options.maxRetryAfterMs ?? 60_000,
  };
}

export function backoff(retry: Retry, tries: number): number {
  return Math.min(retry.maxPauseMs, MIN_PAUSE_MS * 2 ** (tries - 1));
}

/** A try that may pass another time. */
export interface Failure {
  /** What was heard: said when waiting, and when giving up. */
  readonly last: string;
  /** The error answer, thrown when the retries end (`null`: no answer at all). */
  readonly error: ApiError | null;
  /** The wait the answer asked for (`Retry-After`), in milliseconds. */
  readonly askedMs: number | null;
}

/** The retries of one request: how many tries, since when it fails. */
export class Attempts {
  tries = 0;
  private firstFailure: number | null = null;

  constructor(
    private readonly retry: Retry,
    private readonly where: string,
    private readonly clock: () => number,
  ) {}

  /** The wait before the next try and what to say of it; throws the failure's error
   * (or a {@link ConnectionFailedError}) when the bound is reached. */
  pause(failure: Failure): { pauseMs: number; said: string } {
    let pauseMs: number;
    let until = "";
    if (this.retry.retryForMs === null) {
      pauseMs = this.counted(failure);
    } else {
      const now = this.clock();
      this.firstFailure ??= now;
      const timed = this.timed(failure, now - this.firstFailure);
      pauseMs = timed.pauseMs;
      until = `, for ${Math.round(timed.leftMs / 1000)} s more`;
    }
    const limited = failure.error !== null && failure.error.status === RATE_LIMITED;
    const what = limited ? "rate limited" : "waiting for the API";
    const again = `trying again in ${Math.round(pauseMs / 100) / 10} s${until}`;
    return { pauseMs, said: `${what}: ${this.where}: ${failure.last}; ${again}` };
  }

  private counted(failure: Failure): number {
    const retry = this.retry;
    const pause = failure.askedMs ?? backoff(retry, this.tries);
    if (failure.askedMs !== null && pause > retry.maxRetryAfterMs) {
      throw gaveUp(failure, `over ${retry.maxRetryAfterMs / 1000} s`);
    }
    if (this.tries > retry.retries) {
      if (isLimited(failure)) {
        throw gaveUp(failure, `${this.tries} tries, retries ${retry.retries}`);
      }
      throw unavailable(failure, `${this.where}: no answer after ${this.tries} tries`);
    }
    return pause;
  }

  private timed(failure: Failure, waitedMs: number): { pauseMs: number; leftMs: number } {
    const retryForMs = this.retry.retryForMs ?? 0;
    const leftMs = retryForMs - waitedMs;
    if (failure.askedMs !== null) {
      if (failure.askedMs > leftMs) {
        if (isLimited(failure)) {
          throw gaveUp(failure, `${failure.askedMs / 1000} s more would pass retryForMs`);
        }
        throw unavailable(failure, `${this.where}: no answer after ${this.tries} tries`);
      }
      return { pauseMs: failure.askedMs, leftMs };
    }
    if (isLimited(failure)) return { pauseMs: backoff(this.retry, this.tries), leftMs };
    if (leftMs <= 0) {
      const head = `${this.where}: no answer after ${this.tries} tries`;
      throw unavailable(failure, head, `; gave up after ${Math.round(waitedMs / 1000)} s`);
    }
    return { pauseMs: Math.min(backoff(this.retry, this.tries), leftMs), leftMs };
  }
}

function isLimited(failure: Failure): boolean {
  return failure.error instanceof TooManyRequestsError;
}

function copy(error: ApiError, detail: string, message?: string): ApiError {
  const cls = error.constructor as new (
    status: number,
    code: string,
    detail: string,
    init?: { errors?: readonly FieldError[]; retryAfter?: number | null; message?: string },
  ) => ApiError;
  return new cls(error.status, error.code, detail, {
    errors: error.errors,
    retryAfter: error.retryAfter,
    ...(message === undefined ? {} : { message }),
  });
}

/** The 429 (or 503) that ends the waits, saying which bound ended them. */
function gaveUp(failure: Failure, bound: string): Error {
  const error = failure.error;
  if (error === null) return new ConnectionFailedError(`${failure.last} (${bound})`);
  return copy(error, `${error.detail} (not waited for: ${bound})`);
}

/** No usable answer: the last error answer (a 502/503/504) or no answer at all. */
function unavailable(failure: Failure, head: string, tail = ""): Error {
  const message = `${head} (${failure.last})${tail}`;
  if (failure.error === null) return new ConnectionFailedError(message);
  return copy(failure.error, failure.error.detail, message);
}

/** The error an error answer's body describes (`http_error` when it is not the API's). */
export function errorOf(status: number, statusText: string, text: string, headers: Headers): ApiError {
  let code = "http_error";
  let detail = text.slice(0, 500) || statusText;
  let errors: FieldError[] = [];
  let body: unknown = undefined;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (isRecord(body)) {
    code = String(body["error"] ?? code);
    detail = String(body["detail"] ?? "");
    const listed = Array.isArray(body["errors"]) ? body["errors"] : [];
    errors = listed.filter(isRecord).map((e) => ({
      field: String(e["field"] ?? ""),
      message: String(e["message"] ?? ""),
      line: typeof e["line"] === "number" ? e["line"] : null,
    }));
  } else if (body !== undefined) {
    detail = String(body).slice(0, 500);
  }
  const waits = status === RATE_LIMITED || UNAVAILABLE_STATUSES.has(status);
  const retryAfterMs = waits ? retryAfterOf(status, headers, detail) : null;
  let cls = errorFor(status, code);
  if (UNAVAILABLE_STATUSES.has(status) && !(cls.prototype instanceof ServiceUnavailableError || cls === ServiceUnavailableError)) {
    cls = ServiceUnavailableError;
  }
  return new cls(status, code, detail, {
    errors,
    retryAfter: retryAfterMs === null ? null : retryAfterMs / 1000,
  });
}

/** The failure to try again for an error answer, or `null` when it will not pass. */
export function failureOf(error: ApiError): Failure | null {
  const askedMs = error.retryAfter === null ? null : error.retryAfter * 1000;
  if (UNAVAILABLE_STATUSES.has(error.status)) {
    return { last: `${error.status}: ${error.detail}`, error, askedMs };
  }
  if (error.status === RATE_LIMITED && askedMs !== null) {
    return { last: `${error.status} ${error.code}: ${error.detail}`, error, askedMs };
  }
  return null;
}

/**
 * The milliseconds an answer asks to wait: its `Retry-After` (seconds or an HTTP
 * date), else for a 429 the `retry after N s` of its detail; `null` when it names none.
 */
export function retryAfterOf(
  status: number,
  headers: Headers,
  detail: string,
  now: () => number = Date.now,
): number | null {
  const header = (headers.get("Retry-After") ?? "").trim();
  let ms: number | null = null;
  if (header) {
    if (/^\d+(\.\d+)?$/.test(header)) {
      ms = Number(header) * 1000;
    } else {
      const when = Date.parse(header);
      if (!Number.isNaN(when)) ms = Math.ceil((when - now()) / 1000) * 1000;
    }
  }
  if (ms === null && status === RATE_LIMITED) {
    const found = RETRY_AFTER_DETAIL.exec(detail);
    if (found) ms = Number(found[1]) * 1000;
  }
  if (ms === null || !Number.isFinite(ms)) return null;
  return Math.max(MIN_PAUSE_MS, ms);
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
