/**
 * The client against local servers and a given `fetch`: retries that honour
 * `Retry-After` and stop at their bounds, timeouts, the answer's stream parsed into
 * typed events, error codes mapped to classes, search tokens refreshed. No hsearch API
 * here (test/live.test.ts has one).
 */

import assert from "node:assert/strict";
import { once } from "node:events";
import { type IncomingMessage, type Server, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, test } from "node:test";

import {
  ApiError,
  ApiUnavailableError,
  AuthenticationError,
  Client,
  ConnectionFailedError,
  DocumentNotFoundError,
  EventReader,
  type Fetch,
  InvalidRequestError,
  NotFoundError,
  OverloadedError,
  QuotaExceededError,
  RateLimitedError,
  ServiceUnavailableError,
  type AnswerEvent,
  errorFor,
  retryAfterOf,
} from "@hsearch/client";

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

const SEARCH_BODY = {
  query: "q",
  hits: [{ chunk_id: "c", document_id: "d", external_id: "e", score: 1.0 }],
  next_cursor: null,
};

/** A server answering its requests with `handlers` in turn (the last one repeats). */
async function serve(handlers: Handler[]): Promise<{ url: string; server: Server; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      seen.push(`${req.method} ${req.url} ${req.headers.authorization ?? ""}`);
      const handler = handlers[Math.min(seen.length - 1, handlers.length - 1)]!;
      handler(req, res, body);
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  after(() => {
    server.closeAllConnections();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, server, seen };
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Handler {
  return (_req, res) => {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  };
}

/** Records the waits instead of taking them. */
function recorder(): { waits: number[]; sleep: (ms: number) => Promise<void> } {
  const waits: number[] = [];
  return { waits, sleep: async (ms: number) => void waits.push(ms) };
}

describe("retries", () => {
  test("a 429 is tried again after its Retry-After, then answers", async () => {
    const { url, seen } = await serve([
      json(429, { error: "rate_limited", detail: "rate limit: retry after 2 s" }, { "retry-after": "2" }),
      json(200, SEARCH_BODY),
    ]);
    const { waits, sleep } = recorder();
    const said: string[] = [];
    const client = new Client(url, { apiKey: "hsk_a_b", sleep, onRetry: (s) => said.push(s) });
    const page = await client.search("q", { top_k: 1 });
    assert.equal(page.hits[0]?.external_id, "e");
    assert.deepEqual(waits, [2000]);
    assert.equal(seen.length, 2);
    assert.equal(client.requests, 2);
    assert.match(said[0]!, /^rate limited: POST .*\/v1\/search: 429 rate_limited: .*; trying again in 2 s$/);
  });

  test("the 429's detail names the wait when a proxy dropped the header", async () => {
    const { url } = await serve([
      json(429, { error: "rate_limited", detail: "rate limit: retry after 3 s" }),
      json(200, SEARCH_BODY),
    ]);
    const { waits, sleep } = recorder();
    await new Client(url, { sleep }).search("q");
    assert.deepEqual(waits, [3000]);
  });

  test("a 429 that names no wait is thrown at once", async () => {
    const { url, seen } = await serve([json(429, { error: "quota_exceeded", detail: "monthly quota" })]);
    const { waits, sleep } = recorder();
    await assert.rejects(new Client(url, { sleep }).search("q"), QuotaExceededError);
    assert.deepEqual(waits, []);
    assert.equal(seen.length, 1);
  });

  test("a Retry-After over the bound is not waited for", async () => {
    const { url, seen } = await serve([
      json(429, { error: "rate_limited", detail: "later" }, { "retry-after": "3600" }),
    ]);
    const { sleep } = recorder();
    const thrown = await new Client(url, { sleep }).search("q").catch((e: unknown) => e);
    assert.ok(thrown instanceof RateLimitedError);
    assert.equal(thrown.retryAfter, 3600);
    assert.match(thrown.detail, /not waited for: over 60 s/);
    assert.equal(seen.length, 1);
  });

  test("503s back off, doubling, and end in a ServiceUnavailableError after the retries", async () => {
    const { url, seen } = await serve([json(503, { error: "overloaded", detail: "busy" })]);
    const { waits, sleep } = recorder();
    const thrown = await new Client(url, { sleep }).search("q").catch((e: unknown) => e);
    assert.deepEqual(waits, [500, 1000, 2000]);
    assert.equal(seen.length, 4);
    assert.ok(thrown instanceof OverloadedError);
    assert.ok(thrown instanceof ServiceUnavailableError);
    assert.ok(thrown instanceof ApiError);
    assert.ok(thrown instanceof ApiUnavailableError, "a 503 is also 'unavailable'");
    assert.match(thrown.message, /no answer after 4 tries/);
  });

  test("retryForMs bounds the waits by time", async () => {
    const { url, seen } = await serve([json(502, "bad gateway")]);
    let now = 0;
    const sleep = async (ms: number): Promise<void> => void (now += ms);
    const client = new Client(url, { sleep, clock: () => now, retry: { retryForMs: 2000 } });
    await assert.rejects(client.search("q"), ServiceUnavailableError);
    assert.equal(seen.length, 4, "waits of 0.5, 1 and 0.5 s: 2 s in all");
  });

  test("a refused connection is tried again, then a ConnectionFailedError", async () => {
    const { url, server } = await serve([json(200, SEARCH_BODY)]);
    server.close();
    await once(server, "close");
    const { waits, sleep } = recorder();
    const thrown = await new Client(url, { sleep, retry: { retries: 1 } }).search("q").catch((e: unknown) => e);
    assert.ok(thrown instanceof ConnectionFailedError, String(thrown));
    assert.ok(thrown instanceof ApiUnavailableError);
    assert.deepEqual(waits, [500]);
  });

  test("Retry-After as an HTTP date, and at least half a second", () => {
    const now = Date.parse("Wed, 21 Oct 2026 07:28:00 GMT");
    const headers = new Headers({ "retry-after": "Wed, 21 Oct 2026 07:28:05 GMT" });
    assert.equal(retryAfterOf(503, headers, "", () => now), 5000);
    assert.equal(retryAfterOf(429, new Headers({ "retry-after": "0" }), ""), 500);
    assert.equal(retryAfterOf(503, new Headers(), "retry after 4 s"), null, "only a 429's detail");
  });
});

describe("timeouts and aborts", () => {
  test("a request with no answer in timeoutMs fails as a connection that failed", async () => {
    const { url, seen } = await serve([() => undefined]); // never answers
    const client = new Client(url, { timeoutMs: 100, retry: { retries: 0 } });
    const thrown = await client.search("q").catch((e: unknown) => e);
    assert.ok(thrown instanceof ConnectionFailedError, String(thrown));
    assert.match(thrown.message, /timed out after 100 ms/);
    assert.equal(seen.length, 1);
  });

  test("the caller's signal aborts the call with its reason, not tried again", async () => {
    const { url, seen } = await serve([() => undefined]);
    const controller = new AbortController();
    const client = new Client(url, { timeoutMs: 60_000 });
    const call = client.search("q", {}, { signal: controller.signal });
    while (seen.length === 0) await new Promise((r) => setImmediate(r));
    controller.abort(new Error("the user left"));
    await assert.rejects(call, /the user left/);
    assert.equal(seen.length, 1);
  });
});

describe("a given fetch", () => {
  test("sends the key, the body, the query parameters and the paths as the API reads them", async () => {
    const sent: { url: string; init: RequestInit }[] = [];
    const fetch: Fetch = async (url, init) => {
      sent.push({ url, init });
      if (url.includes("/links")) return Response.json({ external_id: "a/b c", out: [], back: [] });
      return Response.json({ error: "document_not_found", detail: "no such document" }, { status: 404 });
    };
    const client = new Client("http://api.test/", { apiKey: "hsk_p_s", fetch });
    const links = await client.getDocumentLinks("a/b c", { types: ["link", "mention"] });
    assert.deepEqual(links.out, []);
    const thrown = await client.getDocument("x?y").catch((e: unknown) => e);
    assert.ok(thrown instanceof DocumentNotFoundError);
    assert.ok(thrown instanceof NotFoundError);
    assert.equal(thrown.status, 404);
    assert.equal(thrown.code, "document_not_found");
    assert.equal(sent[0]!.url, "http://api.test/v1/documents/a/b%20c/links?type=link&type=mention");
    assert.equal(sent[1]!.url, "http://api.test/v1/documents/x%3Fy");
    assert.equal(new Headers(sent[0]!.init.headers).get("authorization"), "Bearer hsk_p_s");
  });

  test("an invalid request names its fields", async () => {
    const body = {
      error: "invalid_request",
      detail: "top_k: must be at least 1",
      errors: [{ field: "top_k", message: "must be at least 1" }],
    };
    const fetch: Fetch = async () => Response.json(body, { status: 422 });
    const thrown = await new Client("http://api.test", { fetch }).search("q", { top_k: 0 }).catch((e: unknown) => e);
    assert.ok(thrown instanceof InvalidRequestError);
    assert.deepEqual(thrown.errors, [{ field: "top_k", message: "must be at least 1", line: null }]);
  });

  test("a token from a function is asked for again once the API says it expired", async () => {
    const tokens = ["old", "new"];
    const fetch: Fetch = async (_url, init) => {
      const auth = new Headers(init.headers).get("authorization");
      if (auth === "Bearer old") {
        return Response.json({ error: "token_expired", detail: "expired" }, { status: 401 });
      }
      return Response.json(SEARCH_BODY);
    };
    const client = new Client("http://api.test", { token: () => tokens.shift()!, fetch });
    const page = await client.search("q");
    assert.equal(page.hits.length, 1);
    assert.deepEqual(tokens, []);
    assert.equal(client.requests, 2);
  });

  test("a fixed token that expired is thrown", async () => {
    const fetch: Fetch = async () => Response.json({ error: "token_expired", detail: "expired" }, { status: 401 });
    await assert.rejects(new Client("http://api.test", { token: "t", fetch }).search("q"), AuthenticationError);
  });
});

describe("error classes", () => {
  test("a code this version does not know is its status's class", () => {
    assert.equal(errorFor(404, "document_not_found"), DocumentNotFoundError);
    assert.equal(errorFor(404, "something_new"), NotFoundError);
    assert.equal(errorFor(409, "document_not_found"), errorFor(409, "x"), "a code must agree with its status");
    assert.equal(errorFor(504, "overloaded"), OverloadedError);
    assert.equal(errorFor(418, "teapot"), ApiError);
  });
});

describe("the answer's stream", () => {
  const EVENTS = [
    ": keep-alive\r\n\r\n",
    'event: progress\ndata: {"stage": "testing", "tested": 8, "relevant": 3, "claims": 3}\n\n',
    'event: retrieval\r\ndata: {"standalone_query": "q", "passages": []}\r\n\r\n',
    'event: delta\ndata: {"text": "Rivers "}\n\n',
    'event: del',
    'ta\ndata: {"text": "flow [1]."}\n\n',
    'event: something_new\ndata: {}\n\n',
    'event: error\ndata: {"error": "llm_failed", "detail": "the model broke off"}\n\n',
    'event: done\ndata: {"answer": null, "degraded": ["llm"], "passages": []}\n\n',
  ];

  test("its events, typed and in order, whatever the chunks", async () => {
    const { url } = await serve([
      (_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        for (const chunk of EVENTS) res.write(chunk);
        res.end();
      },
    ]);
    const seen: AnswerEvent[] = [];
    for await (const event of new Client(url).answerStream("q", { passages: 2 })) seen.push(event);
    assert.deepEqual(
      seen.map((e) => e.event),
      ["progress", "retrieval", "delta", "delta", "error", "done"],
    );
    const progress = seen[0];
    assert.ok(progress?.event === "progress");
    assert.deepEqual([progress.stage, progress.tested, progress.relevant, progress.claims], ["testing", 8, 3, 3]);
    const texts = seen.flatMap((e) => (e.event === "delta" ? [e.text] : []));
    assert.equal(texts.join(""), "Rivers flow [1].");
    const last = seen.at(-1);
    assert.ok(last?.event === "done");
    assert.equal(last.answer.answer, null);
    assert.deepEqual(last.answer.degraded, ["llm"]);
  });

  test("leaving the loop early closes the connection", async () => {
    let closed!: () => void;
    const gone = new Promise<void>((resolve) => (closed = resolve));
    const { url } = await serve([
      (_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(EVENTS[2]);
        res.on("close", closed); // the server never ends this stream itself
      },
    ]);
    for await (const event of new Client(url).answerStream("q")) {
      assert.equal(event.event, "retrieval");
      break;
    }
    await gone;
  });

  test("a refused stream throws before any event", async () => {
    const { url } = await serve([json(401, { error: "invalid_api_key", detail: "no" })]);
    const stream = new Client(url, { apiKey: "hsk_x_y" }).answerStream("q");
    await assert.rejects(stream.next(), AuthenticationError);
  });

  test("the event reader: data lines joined, comments skipped, the last event without its blank line", () => {
    const reader = new EventReader();
    const lines = ["event: x", "data: [1,", "data: 2]", "", ": note", "data: {}"];
    const found = lines.map((line) => reader.feed(line)).filter((e) => e !== null);
    assert.deepEqual(found, [{ event: "x", data: [1, 2] }]);
    assert.deepEqual(reader.close(), { event: "message", data: {} });
  });
});
