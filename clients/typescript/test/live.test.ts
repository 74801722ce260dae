/**
 * The client against a live hsearch API: the repository's test
 * (tests/integration/test_typescript_client.py) starts one on the real stack, indexes
 * three documents in a fresh tenant and gives its URL, a key of that tenant (every
 * scope) and a search token limited to the documents tagged `animals`:
 *
 *   fox     tags animals, links to milvus   "The quick brown fox jumps over the dog."
 *   milvus  tags tech                       "Milvus runs dense and sparse search."
 *   coffee  tags food                       "Espresso needs a fine grind."
 *
 * There is no model server in that stack: answers come back without text, degraded,
 * with their passages. Without HSEARCH_TEST_URL these tests are skipped.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  type AnswerEvent,
  AuthenticationError,
  Client,
  DocumentNotFoundError,
  InsufficientScopeError,
  InvalidApiKeyError,
  InvalidRequestError,
  type SearchResponse,
} from "@hsearch/client";

const URL = process.env.HSEARCH_TEST_URL ?? "";
const KEY = process.env.HSEARCH_TEST_API_KEY ?? "";
const TOKEN = process.env.HSEARCH_TEST_TOKEN ?? "";
const skip = URL === "" ? "no live API: HSEARCH_TEST_URL is not set" : false;

const client = (): Client => new Client(URL, { apiKey: KEY });
const ids = (page: SearchResponse): string[] => page.hits.map((hit) => hit.external_id);

describe("with a key", { skip }, () => {
  test("a search answers typed hits, best first, each explained", async () => {
    const page = await client().search("quick brown fox", { top_k: 3, group_by_document: true, mode: "hybrid" });
    assert.equal(page.hits[0]?.external_id, "fox");
    const hit = page.hits[0]!;
    assert.equal(typeof hit.score, "number");
    assert.equal(hit.title, "Fox");
    assert.ok(hit.explanation !== null, "explained");
    assert.match(hit.snippet ?? "", /<em>/);
    assert.deepEqual(page.degraded, []);
  });

  test("the pages of a search follow the cursors: every document once", async () => {
    const searcher = client();
    const pages: SearchResponse[] = [];
    for await (const page of searcher.searchPages("quick brown fox", { top_k: 1, group_by_document: true })) {
      pages.push(page);
    }
    const seen = pages.flatMap(ids);
    assert.equal(seen[0], "fox");
    assert.equal(pages.length, 3);
    assert.deepEqual([...seen].sort(), ["coffee", "fox", "milvus"]);
    assert.equal(pages.at(-1)?.next_cursor, null);
    assert.equal(searcher.requests, 3);
    const first: string[] = [];
    for await (const hit of searcher.searchHits("quick brown fox", { top_k: 1, group_by_document: true, limit: 2 })) {
      first.push(hit.external_id);
    }
    assert.deepEqual(first, seen.slice(0, 2));
  });

  test("documents, page after page, one at a time; a document and its links", async () => {
    const reader = client();
    const listed: string[] = [];
    for await (const document of reader.listDocuments({ pageSize: 1 })) listed.push(document.external_id);
    assert.deepEqual(listed, ["coffee", "fox", "milvus"]);
    assert.ok(reader.requests >= 3, "one page a request");
    const fox = await reader.getDocument("fox", { includeText: true });
    assert.equal(fox.status, "indexed");
    assert.match(fox.text ?? "", /quick brown fox/);
    const links = await reader.getDocumentLinks("fox");
    assert.deepEqual(
      links.out.map((l) => l.external_id),
      ["milvus"],
    );
    const back = await reader.getDocumentLinks("milvus");
    assert.deepEqual(
      back.back.map((l) => l.external_id),
      ["fox"],
    );
    await assert.rejects(reader.getDocument("nothing-here"), DocumentNotFoundError);
  });

  test("an answer without a model: no text, the reason, and the passages", async () => {
    const answer = await client().answer("What does Milvus run?", { passages: 3 });
    assert.equal(answer.answer, null);
    assert.ok(answer.degraded.length > 0);
    assert.ok(answer.passages.some((p) => p.external_id === "milvus"));
  });

  test("an answer's stream: the passages first, the whole answer last", async () => {
    const events: AnswerEvent[] = [];
    for await (const event of client().answerStream("What does Milvus run?", { passages: 3 })) events.push(event);
    const first = events[0];
    const last = events.at(-1);
    assert.ok(first?.event === "retrieval", JSON.stringify(events.map((e) => e.event)));
    assert.ok(first.passages.some((p) => p.external_id === "milvus"));
    assert.ok(last?.event === "done");
    assert.equal(last.answer.answer, null);
    assert.ok(last.answer.degraded.length > 0);
    assert.deepEqual(
      last.answer.passages.map((p) => p.external_id),
      first.passages.map((p) => p.external_id),
    );
    assert.ok(events.every((e) => e.event !== "delta"), "no model: no text");
  });

  test("a lazy answer's stream: progress first, the budget it spent last", async () => {
    const events: AnswerEvent[] = [];
    const stream = client().answerStream("What does Milvus run?", {
      strategy: "lazy",
      budget: { relevance_tests: 5 },
    });
    for await (const event of stream) events.push(event);
    assert.equal(events[0]?.event, "progress");
    const last = events.at(-1);
    assert.ok(last?.event === "done");
    assert.equal(last.answer.strategy, "lazy");
    const spent = last.answer.lazy?.budget["relevance_tests"];
    assert.ok(spent !== undefined && spent.used <= 5 && spent.allowed === 5, JSON.stringify(spent));
  });

  test("a bad key is a 401 with its code's class", async () => {
    const stranger = new Client(URL, { apiKey: "hsk_nosuchkey_0000000000000000" });
    const thrown = await stranger.search("fox").catch((e: unknown) => e);
    assert.ok(thrown instanceof InvalidApiKeyError, String(thrown));
    assert.ok(thrown instanceof AuthenticationError);
    assert.equal(thrown.status, 401);
    assert.equal(thrown.code, "invalid_api_key");
    assert.equal(stranger.requests, 1, "not tried again");
  });
});

describe("with a search token", { skip }, () => {
  const browser = (): Client => new Client(URL, { token: TOKEN });

  test("a search sees only the documents its filter selects", async () => {
    const query = "Milvus runs dense and sparse search";
    const withKey = await client().search(query, { top_k: 10, group_by_document: true });
    assert.deepEqual([...ids(withKey)].sort(), ["coffee", "fox", "milvus"]);
    const withToken = await browser().search(query, { top_k: 10, group_by_document: true });
    assert.deepEqual(ids(withToken), ["fox"]);
  });

  test("it lists and reads only those documents, and may not write", async () => {
    const reader = browser();
    const listed: string[] = [];
    for await (const document of reader.listDocuments()) listed.push(document.external_id);
    assert.deepEqual(listed, ["fox"]);
    await assert.rejects(reader.getDocument("milvus"), DocumentNotFoundError);
    assert.equal((await reader.getDocument("fox")).external_id, "fox");
    await assert.rejects(
      reader.submitDocuments([{ external_id: "x", text: "x" }]),
      InsufficientScopeError,
    );
  });

  test("its max_top_k caps top_k", async () => {
    await assert.rejects(browser().search("fox", { top_k: 50 }), InvalidRequestError);
  });

  test("a token minted by the client, asked for by a function", async () => {
    let asked = 0;
    const minted = new Client(URL, {
      token: async () => {
        asked += 1;
        const created = await client().createToken({ filter: { tags: { contains_any: ["tech"] } }, expires_in_s: 60 });
        return created.token;
      },
    });
    const page = await minted.search("Milvus dense sparse search", { group_by_document: true });
    assert.deepEqual(ids(page), ["milvus"]);
    await minted.search("coffee");
    assert.equal(asked, 1, "asked for once, then kept");
  });
});
