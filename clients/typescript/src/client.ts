/**
 * The client: {@link Client}, over the platform's `fetch` (Node ≥ 20, browsers) or one
 * given to it.
 */

import {
  ApiError,
  AuthenticationError,
  ClientError,
  ConnectionFailedError,
  ResponseFormatError,
} from "./errors.js";
import {
  Attempts,
  type Failure,
  type Retry,
  type RetryOptions,
  errorOf,
  failureOf,
  isRecord,
  retryOf,
} from "./retry.js";
import { events, type ServerEvent } from "./sse.js";
import type {
  Answer,
  AnswerEvent,
  AnswerParams,
  Citation,
  ContextPassage,
  Document,
  DocumentInput,
  DocumentLinks,
  DocumentPage,
  Hit,
  Job,
  JobAccepted,
  SearchParams,
  SearchResponse,
  Sentence,
  TokenCreated,
  TokenParams,
} from "./types.js";

export const DEFAULT_URL = "http://127.0.0.1:8000";
export const VERSION = "0.1.0";
/** Rows per page when listing (the API's most). */
export const PAGE_SIZE = 500;
const JSON_TYPE = "application/json";
const SSE_TYPE = "text/event-stream";
const FINISHED: ReadonlySet<string> = new Set(["succeeded", "partial", "failed", "cancelled"]);

/** What the client calls to send a request: the platform's `fetch`, or one like it. */
export type Fetch = (input: string, init: RequestInit) => Promise<Response>;

/** A search token, or where to get one: a function the client calls for the first
 * request and again when the API says the token expired (a browser asks its backend,
 * which mints tokens with {@link Client.createToken}). */
export type TokenSource = string | (() => string | Promise<string>);

export interface ClientOptions {
  /** An API key (`hsk_...`), for a server: it decides the tenant and the scopes. */
  readonly apiKey?: string;
  /** A search token (`POST /v1/tokens`), for a browser: search, answers and document
   * reads, only of the documents its filter selects. */
  readonly token?: TokenSource;
  /** Sends the requests (default: the global `fetch`). */
  readonly fetch?: Fetch;
  /** Per try: the whole request, or for a stream the wait for each event (default 60 s). */
  readonly timeoutMs?: number;
  readonly retry?: RetryOptions;
  /** Hears of each wait before it is taken. */
  readonly onRetry?: (said: string) => void;
  /** Sent with every request. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Waits between tries (for tests). */
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Milliseconds, for `retryForMs` (for tests). */
  readonly clock?: () => number;
}

/** Per call. */
export interface CallOptions {
  /** Aborts the call (its tries and waits included); the abort's reason is thrown. */
  readonly signal?: AbortSignal;
}

interface Request {
  readonly method: string;
  readonly path: string;
  /** An array is the parameter repeated (`?type=a&type=b`); `undefined` is left out. */
  readonly params?: Readonly<Record<string, string | number | readonly string[] | undefined>>;
  readonly body?: unknown;
  readonly accept?: string;
}

/**
 * A client of one hsearch API with one credential: an API key (a server) or a search
 * token (a browser), sent as `Authorization: Bearer`.
 *
 * Requests that may pass another time (no connection, a timeout, 502/503/504, a 429
 * that names its wait) are tried again as `retry` says (3 more tries by default,
 * honouring `Retry-After`); any other error answer throws the {@link ApiError} class of
 * its code at once (`errors.ts`). `requests` counts the HTTP requests sent, tries
 * included.
 */
export class Client {
  readonly baseUrl: string;
  readonly retry: Retry;
  requests = 0;
  private readonly apiKey: string | undefined;
  private readonly tokenSource: TokenSource | undefined;
  private token: string | undefined;
  private readonly fetcher: Fetch;
  private readonly timeoutMs: number;
  private readonly onRetry: ((said: string) => void) | undefined;
  private readonly headers: Readonly<Record<string, string>>;
  private readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  private readonly clock: () => number;

  constructor(baseUrl: string = DEFAULT_URL, options: ClientOptions = {}) {
    if (options.apiKey !== undefined && options.token !== undefined) {
      throw new TypeError("Client: an apiKey or a token, not both");
    }
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.tokenSource = options.token;
    this.token = typeof options.token === "string" ? options.token : undefined;
    // Called unbound: a browser's fetch refuses to run with another `this`.
    const platform = globalThis.fetch;
    this.fetcher = options.fetch ?? ((input, init) => platform(input, init));
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.retry = retryOf(options.retry);
    this.onRetry = options.onRetry;
    this.headers = options.headers ?? {};
    this.sleep = options.sleep ?? sleep;
    this.clock = options.clock ?? (() => Date.now());
  }

  // Search.

  /** `POST /v1/search`: one page of hits. A field left out takes the server's default
   * (chunks, not documents, unless `group_by_document`). */
  async search(query: string, params: SearchParams = {}, options: CallOptions = {}): Promise<SearchResponse> {
    const body = { query, ...given(params) };
    return (await this.send({ method: "POST", path: "/v1/search", body }, options)) as SearchResponse;
  }

  /** The pages of one search, following `next_cursor` (the same fused list, so pages
   * neither repeat nor skip hits across writes) until the window ends or `maxPages`
   * were read. */
  async *searchPages(
    query: string,
    params: SearchParams & { readonly maxPages?: number } = {},
    options: CallOptions = {},
  ): AsyncGenerator<SearchResponse, void, undefined> {
    const { maxPages, ...fields } = params;
    let page = await this.search(query, fields, options);
    let pages = 1;
    yield page;
    const { offset: _offset, ...rest } = fields;
    while (page.next_cursor && (maxPages === undefined || pages < maxPages)) {
      page = await this.search(query, { ...rest, cursor: page.next_cursor }, options);
      pages += 1;
      yield page;
    }
  }

  /** The hits of one search, page after page (at most `limit`). */
  async *searchHits(
    query: string,
    params: SearchParams & { readonly limit?: number } = {},
    options: CallOptions = {},
  ): AsyncGenerator<Hit, void, undefined> {
    const { limit, ...fields } = params;
    let seen = 0;
    for await (const page of this.searchPages(query, fields, options)) {
      for (const hit of page.hits) {
        if (limit !== undefined && seen >= limit) return;
        seen += 1;
        yield hit;
      }
    }
  }

  // Answers.

  /** `POST /v1/answer`: an answer whose citations the server checked; without a model
   * (or when it fails) `answer` is `null`, `degraded` says why and the passages are
   * there. */
  async answer(query: string, params: AnswerParams = {}, options: CallOptions = {}): Promise<Answer> {
    const body = { query, ...given(params) };
    return (await this.send({ method: "POST", path: "/v1/answer", body }, options)) as Answer;
  }

  /**
   * `POST /v1/answer` streamed: its events as they come (`retrieval`, `delta` texts,
   * `citation` per checked sentence, `error` when the model broke off, `done` with the
   * whole answer last). A refused request throws before any event; leaving the loop
   * early (or aborting `signal`) closes the stream, and the server cancels the model's
   * request. A stream that breaks once begun throws {@link ConnectionFailedError}.
   */
  async *answerStream(
    query: string,
    params: AnswerParams = {},
    options: CallOptions = {},
  ): AsyncGenerator<AnswerEvent, void, undefined> {
    const request: Request = {
      method: "POST",
      path: "/v1/answer",
      body: { query, ...given(params), stream: true },
      accept: SSE_TYPE,
    };
    const response = await this.respond(request, options);
    const deadline = response.deadline;
    try {
      if (response.body === null) throw new ResponseFormatError(`${this.where(request)}: no body`);
      for await (const found of events(response.body)) {
        deadline.restart();
        const event = answerEvent(found, this.where(request));
        if (event !== null) yield event;
      }
    } catch (error) {
      throw this.broken(error, deadline, options.signal, `${this.where(request)}: the stream broke off`);
    } finally {
      deadline.end();
    }
  }

  // Documents.

  /** `POST /v1/documents`: a batch to index, as one job (`waitForJob`). Needs a key
   * with the `ingest` scope. */
  async submitDocuments(
    documents: readonly DocumentInput[],
    params: { readonly webhook_url?: string } = {},
    options: CallOptions = {},
  ): Promise<JobAccepted> {
    const body = { documents, ...given(params) };
    return (await this.send({ method: "POST", path: "/v1/documents", body }, options)) as JobAccepted;
  }

  /** One document: indexed, or pending in a job; with `includeText` its full text. */
  async getDocument(
    externalId: string,
    params: { readonly includeText?: boolean } = {},
    options: CallOptions = {},
  ): Promise<Document> {
    const path = `/v1/documents/${pathSegment(externalId)}`;
    const query = params.includeText ? { include: "text" } : undefined;
    return (await this.send({ method: "GET", path, params: query }, options)) as Document;
  }

  /** An indexed document's links: `out` (its own, resolved or not) and `back` (from
   * the indexed documents linking to it), by type; only `types` when given. */
  async getDocumentLinks(
    externalId: string,
    params: { readonly types?: string | readonly string[] } = {},
    options: CallOptions = {},
  ): Promise<DocumentLinks> {
    const path = `/v1/documents/${pathSegment(externalId)}/links`;
    const types = typeof params.types === "string" ? [params.types] : params.types;
    const query = types && types.length > 0 ? { type: types } : undefined;
    return (await this.send({ method: "GET", path, params: query }, options)) as DocumentLinks;
  }

  /** One page of the tenant's documents, in external id order. */
  async documentsPage(
    params: { readonly source?: string; readonly limit?: number; readonly cursor?: string } = {},
    options: CallOptions = {},
  ): Promise<DocumentPage> {
    const query = { source: params.source, limit: params.limit, cursor: params.cursor };
    return (await this.send({ method: "GET", path: "/v1/documents", params: query }, options)) as DocumentPage;
  }

  /** The tenant's documents in external id order (a token's: those its filter
   * selects), page after page (at most `limit`; `pageSize` a request). */
  async *listDocuments(
    params: { readonly source?: string; readonly limit?: number; readonly pageSize?: number } = {},
    options: CallOptions = {},
  ): AsyncGenerator<Document, void, undefined> {
    let cursor: string | undefined;
    let left = params.limit;
    const most = Math.min(params.pageSize ?? PAGE_SIZE, PAGE_SIZE);
    while (left === undefined || left > 0) {
      const size = left === undefined ? most : Math.min(left, most);
      const page = await this.documentsPage({ source: params.source, limit: size, cursor }, options);
      const rows = page.documents.slice(0, size);
      yield* rows;
      if (left !== undefined) left -= rows.length;
      if (!page.next_cursor) return;
      cursor = page.next_cursor;
    }
  }

  // Jobs.

  async getJob(jobId: string, options: CallOptions = {}): Promise<Job> {
    return (await this.send({ method: "GET", path: `/v1/jobs/${pathSegment(jobId)}` }, options)) as Job;
  }

  /** The job once it has finished, read every `pollIntervalMs`; throws a
   * `ClientError` after `timeoutMs`. */
  async waitForJob(
    jobId: string,
    params: { readonly timeoutMs?: number; readonly pollIntervalMs?: number } = {},
    options: CallOptions = {},
  ): Promise<Job> {
    const timeoutMs = params.timeoutMs ?? 300_000;
    const pollMs = params.pollIntervalMs ?? 1_000;
    const deadline = this.clock() + timeoutMs;
    for (;;) {
      const job = await this.getJob(jobId, options);
      if (FINISHED.has(job.status)) return job;
      if (this.clock() + pollMs > deadline) {
        throw new ClientError(`job ${jobId} still ${job.status} after ${timeoutMs / 1000} s`);
      }
      await this.sleep(pollMs, options.signal);
    }
  }

  // Search tokens.

  /** `POST /v1/tokens`: a short-lived search token restricted to `filter`, for a
   * browser; minted on a server, with a key holding `search` or `admin`. */
  async createToken(params: TokenParams, options: CallOptions = {}): Promise<TokenCreated> {
    return (await this.send({ method: "POST", path: "/v1/tokens", body: params }, options)) as TokenCreated;
  }

  // Transport.

  private where(request: Request): string {
    return `${request.method} ${this.baseUrl}${request.path}`;
  }

  /** The parsed body of `request`'s answer (`null` when empty). */
  private async send(request: Request, options: CallOptions): Promise<unknown> {
    const response = await this.respond(request, options);
    try {
      const text = await response.text();
      if (text === "") return null;
      try {
        return JSON.parse(text) as unknown;
      } catch (error) {
        const what = `${this.where(request)}: ${response.status} with a body not JSON`;
        throw new ResponseFormatError(what, { cause: error });
      }
    } catch (error) {
      throw this.broken(error, response.deadline, options.signal, `${this.where(request)}: the answer broke off`);
    } finally {
      response.deadline.end();
    }
  }

  /** The successful answer to `request` (its body unread, its deadline running),
   * tried again as {@link retry} says. */
  private async respond(request: Request, options: CallOptions): Promise<Response & { deadline: Deadline }> {
    const attempts = new Attempts(this.retry, this.where(request), this.clock);
    let refreshed = false;
    for (;;) {
      attempts.tries += 1;
      this.requests += 1;
      const deadline = new Deadline(this.timeoutMs, options.signal);
      let failure: Failure;
      try {
        const response = await this.fetcher(this.url(request), {
          method: request.method,
          headers: await this.headersFor(request),
          body: request.body === undefined ? null : JSON.stringify(request.body),
          signal: deadline.signal,
        });
        if (response.ok) return Object.assign(response, { deadline });
        const text = await response.text();
        deadline.end();
        const error = errorOf(response.status, response.statusText, text, response.headers);
        if (!refreshed && this.mayRefresh(error)) {
          // A token from a function that has expired: ask for a new one, once.
          refreshed = true;
          this.token = undefined;
          attempts.tries -= 1;
          continue;
        }
        const again = failureOf(error);
        if (again === null) throw error;
        failure = again;
      } catch (error) {
        deadline.end();
        if (error instanceof ClientError) throw error;
        if (options.signal?.aborted) throw options.signal.reason;
        failure = { last: describe(error, deadline), error: null, askedMs: null };
      }
      const { pauseMs, said } = attempts.pause(failure);
      this.onRetry?.(said);
      await this.sleep(pauseMs, options.signal);
    }
  }

  private mayRefresh(error: ApiError): boolean {
    return (
      typeof this.tokenSource === "function" &&
      error instanceof AuthenticationError &&
      (error.code === "token_expired" || error.code === "invalid_token")
    );
  }

  private url(request: Request): string {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(request.params ?? {})) {
      if (value === undefined) continue;
      if (Array.isArray(value)) for (const one of value as readonly string[]) query.append(name, one);
      else query.append(name, String(value));
    }
    const search = query.toString();
    return `${this.baseUrl}${request.path}${search ? `?${search}` : ""}`;
  }

  private async headersFor(request: Request): Promise<Record<string, string>> {
    const headers: Record<string, string> = { Accept: request.accept ?? JSON_TYPE, ...this.headers };
    if (request.body !== undefined) headers["Content-Type"] = JSON_TYPE;
    const credential = this.apiKey ?? (await this.currentToken());
    if (credential) headers["Authorization"] = `Bearer ${credential}`;
    return headers;
  }

  private async currentToken(): Promise<string | undefined> {
    if (this.token === undefined && typeof this.tokenSource === "function") {
      this.token = await this.tokenSource();
    }
    return this.token;
  }

  /** What a body that failed while read throws. */
  private broken(error: unknown, deadline: Deadline, signal: AbortSignal | undefined, what: string): unknown {
    if (error instanceof ClientError) return error;
    if (signal?.aborted) return signal.reason;
    return new ConnectionFailedError(`${what}: ${describe(error, deadline)}`, { cause: error });
  }
}

/**
 * One try's time: aborts its `signal` after `ms` (or when the caller's signal aborts);
 * `restart` gives a stream another `ms` for its next event.
 */
class Deadline {
  private readonly controller = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly unlink: () => void;
  timedOut = false;

  constructor(
    readonly ms: number,
    outer: AbortSignal | undefined,
  ) {
    const abort = (): void => this.controller.abort(outer?.reason);
    if (outer?.aborted) abort();
    outer?.addEventListener("abort", abort, { once: true });
    this.unlink = () => outer?.removeEventListener("abort", abort);
    this.restart();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  restart(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.controller.abort(new DOMException(`timed out after ${this.ms} ms`, "TimeoutError"));
    }, this.ms);
  }

  end(): void {
    clearTimeout(this.timer);
    this.unlink();
  }
}

function describe(error: unknown, deadline: Deadline): string {
  if (deadline.timedOut) return `timed out after ${deadline.ms} ms`;
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
    return `${error.name}: ${error.message}${cause}`;
  }
  return String(error);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const done = (): void => {
      signal?.removeEventListener("abort", abort);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const abort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", abort, { once: true });
  });
}

/** The fields that were given: what is left out (or `undefined`) takes the server's
 * default. */
function given<T extends object>(fields: T): Partial<T> {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** A path segment as sent: every character escaped but `/` (external ids are paths,
 * and the API's document routes take them whole). */
export function pathSegment(segment: string): string {
  return encodeURIComponent(segment).replace(/%2F/gi, "/");
}

/** The typed event of an answer's stream; `null` for an event this version does not
 * know (the API may add some). */
export function answerEvent(found: ServerEvent, where = "the answer's stream"): AnswerEvent | null {
  const data = found.data;
  if (!isRecord(data)) {
    throw new ResponseFormatError(`${where}: the ${found.event} event is not what the API sends`);
  }
  switch (found.event) {
    case "progress":
      return {
        event: "progress",
        stage: String(data["stage"] ?? ""),
        tested: Number(data["tested"] ?? 0),
        relevant: Number(data["relevant"] ?? 0),
        claims: Number(data["claims"] ?? 0),
      };
    case "retrieval":
      return {
        event: "retrieval",
        standalone_query: String(data["standalone_query"] ?? ""),
        passages: (data["passages"] ?? []) as ContextPassage[],
      };
    case "delta":
      return { event: "delta", text: String(data["text"] ?? "") };
    case "citation":
      return {
        event: "citation",
        sentence: data["sentence"] as Sentence,
        citations: (data["citations"] ?? []) as Citation[],
      };
    case "error":
      return { event: "error", error: String(data["error"] ?? ""), detail: String(data["detail"] ?? "") };
    case "done":
      return { event: "done", answer: data as unknown as Answer };
    default:
      return null;
  }
}
