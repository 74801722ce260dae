// The /playground page: a search run as a chosen tenant, each hit explained.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const fmt = (v, digits = 4) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));

  async function loadTenants() {
    const select = $("tenant");
    const tenants = await hsearch.request("GET", "/ops/api/tenants");
    select.replaceChildren(
      ...tenants.map((t) => hsearch.el("option", `${t.id} (${t.name})${t.status === "active" ? "" : ` · ${t.status}`}`, { value: t.id })),
    );
  }

  function row(cells, attrs = {}) {
    const tr = hsearch.el("tr", null, attrs);
    for (const c of cells) {
      const td = hsearch.el("td");
      if (c instanceof Node) td.append(c);
      else td.textContent = String(c);
      tr.append(td);
    }
    return tr;
  }

  // A snippet is escaped text with <em> around the matches: shown as text and <mark>s,
  // never parsed as HTML.
  function snippet(value) {
    const cell = document.createDocumentFragment();
    const decode = document.createElement("textarea");
    value.split(/(<em>.*?<\/em>)/).forEach((piece) => {
      const marked = piece.startsWith("<em>") && piece.endsWith("</em>");
      decode.innerHTML = marked ? piece.slice(4, -5) : piece;
      cell.append(marked ? hsearch.el("mark", decode.value) : document.createTextNode(decode.value));
    });
    const span = hsearch.el("span");
    span.append(cell);
    return span;
  }

  function show(result) {
    const summary = $("fusion-summary");
    const perLeg = (weights) =>
      Object.entries(weights || {})
        .map(([leg, w]) => `${leg} ${fmt(w, 3)}`)
        .join(", ") || "–";
    const items = [
      ["method", result.method],
      ["mode", result.mode],
      ["weights", perLeg(result.weights)],
      ["applied weights", perLeg(result.applied_weights)],
      ["degraded", (result.degraded || []).join(", ") || "no"],
      ["total", `${result.total_relation === "gte" ? "at least " : ""}${result.total}`],
      // What was searched for beyond the query's words: corrections, completions, synonyms.
      ["expansions", (result.expansions || []).map((x) => `${x.query} → ${x.matched} (${x.kind}${x.kind === "typo" ? ` ${x.typos}` : ""})`).join(", ") || "none"],
      ["sort", result.sort ? `${result.sort.by.map((c) => `${c.field} ${c.order}`).join(", ")} over the first ${result.sort.window}` : "relevance"],
      ["took", `${fmt(result.took_ms, 1)} ms`],
    ];
    summary.replaceChildren(...items.flatMap(([k, v]) => [hsearch.el("dt", k), hsearch.el("dd", v, { "data-field": k })]));
    $("timings").tBodies[0].replaceChildren(
      ...Object.entries(result.timings).map(([stage, ms]) => row([stage.replace(/_ms$/, ""), fmt(ms, 2)], { "data-stage": stage })),
    );
    $("legs").tBodies[0].replaceChildren(
      ...result.legs.map((l) => row([l.leg, l.status, fmt(l.took_ms, 2), l.candidates ?? "–"])),
    );
    // One rank and one score column per leg of the search, as the response names them.
    const legs = result.legs.map((l) => l.leg);
    $("hit-columns").replaceChildren(
      ...["#", "document", "chunk", "matching chunks", "fused score"]
        .concat(legs.flatMap((leg) => [`${leg} rank`, `${leg} score`]), ["rerank"])
        .map((name) => hsearch.el("th", name)),
    );
    $("hits").tBodies[0].replaceChildren(
      ...result.hits.map((h, i) => {
        const e = h.explanation;
        const tr = row(
          [
            result.offset + i + 1,
            `${h.title || h.external_id}`,
            h.snippet ? snippet(h.snippet) : h.text.slice(0, 160),
            h.matching_chunks,
            fmt(e.fused_score),
            ...legs.flatMap((leg) => [e.legs[leg]?.rank ?? "–", fmt(e.legs[leg]?.score)]),
            fmt(e.rerank_score),
          ],
          { class: "hit" },
        );
        return tr;
      }),
    );
    $("summary").hidden = false;
    $("results").hidden = false;
    document.body.dataset.hits = String(result.hits.length);
    document.body.dataset.searches = String(Number(document.body.dataset.searches || 0) + 1);
  }

  let searches = 0;

  async function search() {
    const error = $("search-error");
    hsearch.text(error, "");
    const body = {
      query: $("query").value,
      mode: $("mode").value,
      top_k: Number($("top_k").value) || 10,
      // Documents, as a results page shows them; unchecked: every matching chunk.
      group_by_document: $("group_by_document").checked,
      typo_tolerance: $("typo_tolerance").checked,
      prefix: $("prefix").checked,
    };
    if ($("fusion").value) body.fusion = $("fusion").value;
    const sortField = $("sort_field").value.trim();
    if (sortField) body.sort = [{ field: sortField, order: $("sort_order").value }, "_score"];
    const filter = $("filter").value.trim();
    if (filter) {
      try {
        body.filter = JSON.parse(filter);
      } catch (err) {
        hsearch.text(error, `filter: not JSON (${err.message})`);
        return;
      }
    }
    // Only the latest search is shown: while typing, an earlier answer can arrive later.
    const ticket = ++searches;
    $("run").disabled = true;
    try {
      const result = await hsearch.request("POST", "/ops/api/search", { body, headers: { "X-Hsearch-Tenant": $("tenant").value } });
      if (ticket === searches) show(result);
    } catch (err) {
      if (ticket === searches) hsearch.text(error, err.message);
    } finally {
      if (ticket === searches) $("run").disabled = false;
    }
  }

  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    search();
  });

  // Search as you type: with "search as you type" checked, a pause in typing searches,
  // the last word matching as the start of longer words (the request's prefix).
  let typing = null;
  $("query").addEventListener("input", () => {
    if (!$("prefix").checked) return;
    clearTimeout(typing);
    typing = setTimeout(() => {
      if ($("query").value.trim() && $("search-form").reportValidity()) search();
    }, 250);
  });

  // The answer's text with each checked marker [n] linked to its passage below; a
  // sentence no passage supports is marked as such.
  function showAnswer(answer) {
    const text = $("answer-text");
    const pieces = [];
    const source = answer.answer || "";
    let at = 0;
    for (const sentence of answer.sentences) {
      if (sentence.start > at) pieces.push(document.createTextNode(source.slice(at, sentence.start)));
      const span = hsearch.el("span", sentence.text, { class: sentence.supported ? "supported" : "unsupported" });
      if (!sentence.supported) span.title = "no passage supports this sentence";
      pieces.push(span);
      at = sentence.end;
      for (const number of sentence.citations) {
        pieces.push(hsearch.el("a", `[${number}]`, { href: `#passage-${number}`, class: "citation" }));
        at += `[${number}]`.length;
      }
    }
    if (at < source.length) pieces.push(document.createTextNode(source.slice(at)));
    text.replaceChildren(...pieces);
    const status = answer.answer === null ? `No answer: ${answer.degraded.join("; ")}` : `${answer.model} · ${answer.prompt_version} · ${fmt(answer.timings.total_ms, 0)} ms${answer.cached ? " · cached" : ""}`;
    hsearch.text($("answer-status"), status);
    const quotes = new Map(answer.citations.map((c) => [c.number, c.quote]));
    $("answer-passages").replaceChildren(
      ...answer.passages.map((p) => {
        const item = hsearch.el("li", `${p.title || p.external_id}: ${p.text.slice(0, 300)}`, { id: `passage-${p.number}`, value: String(p.number) });
        if (quotes.has(p.number)) item.append(hsearch.el("blockquote", quotes.get(p.number)));
        return item;
      }),
    );
    $("answer").hidden = false;
  }

  $("ask").addEventListener("click", async () => {
    const error = $("search-error");
    hsearch.text(error, "");
    const body = { query: $("query").value, mode: $("mode").value };
    if ($("fusion").value) body.fusion = $("fusion").value;
    if (!body.query.trim()) {
      hsearch.text(error, "query: ask something");
      return;
    }
    $("ask").disabled = true;
    try {
      showAnswer(await hsearch.request("POST", "/ops/api/answer", { body, headers: { "X-Hsearch-Tenant": $("tenant").value } }));
    } catch (err) {
      hsearch.text(error, err.message);
    } finally {
      $("ask").disabled = false;
    }
  });

  hsearch.header().catch(() => {});
  loadTenants().catch((err) => hsearch.text($("search-error"), `tenants: ${err.message}`));
})();
