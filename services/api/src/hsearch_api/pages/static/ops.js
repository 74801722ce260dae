// The /ops page: polls /ops/api/dashboard (totals since the stack started, added up over
// every process) and charts rates and percentiles over a sliding window between two
// readings, as Prometheus' rate() and histogram_quantile() would. The first answer also
// carries the snapshots of the search totals the server keeps (`history`): the search
// panels draw them at once, so the page opens on the last minutes, not on an empty chart.
"use strict";

(() => {
  const INTERVAL_MS = Number(document.body.dataset.intervalMs) || 2000;
  const WINDOW_S = Number(document.body.dataset.windowS) || 30;
  const MAX_POINTS = 300;
  const COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#be185d"];

  const readings = [];
  const panels = {};

  const sum = (obj) => Object.values(obj || {}).reduce((a, b) => a + b, 0);
  // A counter that went down was reset (the stack restarted): count from zero.
  const increase = (cur, base) => (cur >= base ? cur - base : cur);
  const round = (v, digits = 2) => (v === null || v === undefined ? null : Number(v.toFixed(digits)));

  // The q quantile of (upper bound, count) pairs, +Inf as null, linear inside the bucket.
  function quantile(q, pairs) {
    const ordered = pairs.slice().sort((a, b) => (a[0] === null ? 1 : b[0] === null ? -1 : a[0] - b[0]));
    if (!ordered.length) return null;
    const total = ordered[ordered.length - 1][1];
    if (total <= 0) return null;
    const rank = q * total;
    let lower = 0;
    let below = 0;
    for (const [bound, cumulative] of ordered) {
      if (cumulative >= rank && cumulative > below) {
        if (bound === null) return lower;
        return lower + ((bound - lower) * (rank - below)) / (cumulative - below);
      }
      if (bound !== null) lower = bound;
      below = cumulative;
    }
    return lower;
  }

  function windowBuckets(cur, base) {
    if (!cur) return [];
    const before = new Map(((base && base.buckets) || []).map(([b, c]) => [String(b), c]));
    return cur.buckets.map(([bound, c]) => [bound, increase(c, before.get(String(bound)) || 0)]);
  }

  // Each panel: its series' labels (fixed, or read from the first reading) and the
  // values of one point from the latest reading and the window's base reading. `past`:
  // the server's snapshots (`history`) hold what the panel needs.
  const DEFINITIONS = {
    searches: {
      past: true,
      labels: () => ["all", "ok"],
      unit: "/s",
      point: (cur, base, dt) => [
        increase(sum(cur.searches), sum(base.searches)) / dt,
        increase(cur.searches.ok || 0, base.searches.ok || 0) / dt,
      ],
    },
    latency: {
      past: true,
      labels: () => ["dense p50", "dense p95", "sparse p50", "sparse p95"],
      unit: " ms",
      point: (cur, base) =>
        ["dense", "sparse"].flatMap((leg) => {
          const pairs = windowBuckets(cur.legs[leg], base.legs[leg]);
          return [0.5, 0.95].map((q) => {
            const s = quantile(q, pairs);
            return s === null ? null : s * 1000;
          });
        }),
    },
    cache: {
      past: true,
      labels: () => ["result", "embedding"],
      unit: "",
      point: (cur, base) =>
        ["result", "embedding"].map((c) => {
          const now = cur.cache[c] || {};
          const then = base.cache[c] || {};
          const lookups = increase(sum(now), sum(then));
          return lookups > 0 ? increase(now.hit || 0, then.hit || 0) / lookups : null;
        }),
    },
    degraded: {
      past: true,
      labels: () => ["degraded", "failed"],
      unit: "/s",
      point: (cur, base, dt) => [
        increase(cur.searches.degraded || 0, base.searches.degraded || 0) / dt,
        increase(cur.searches.error || 0, base.searches.error || 0) / dt,
      ],
    },
    ingest: {
      labels: () => ["documents indexed", "chunks"],
      unit: "/s",
      point: (cur, base, dt) => [
        increase(cur.ingest_documents.indexed || 0, base.ingest_documents.indexed || 0) / dt,
        increase(cur.ingest_chunks, base.ingest_chunks) / dt,
      ],
    },
    queue: {
      labels: (first) => Object.keys(first.queue_depth || { ingest: 0 }),
      unit: "",
      gauge: true,
      point: (cur, _base, _dt, labels) => labels.map((q) => (cur.queue_depth ? cur.queue_depth[q] ?? 0 : null)),
    },
    answers: {
      labels: () => ["answered", "degraded"],
      unit: "/s",
      point: (cur, base, dt) =>
        ["answered", "degraded"].map((o) => increase((cur.answers || {})[o] || 0, (base.answers || {})[o] || 0) / dt),
    },
    unsupported: {
      labels: () => ["unsupported"],
      unit: "",
      point: (cur, base) => {
        const now = cur.answer_sentences || {};
        const then = base.answer_sentences || {};
        const all = increase(sum(now), sum(then));
        return [all > 0 ? increase(now.unsupported || 0, then.unsupported || 0) / all : null];
      },
    },
    jobs: {
      labels: (first) => Object.keys(first.jobs || {}),
      unit: "",
      gauge: true,
      point: (cur, _base, _dt, labels) => labels.map((s) => (cur.jobs ? cur.jobs[s] ?? 0 : null)),
    },
  };

  function makePanel(name, first) {
    const section = document.querySelector(`[data-panel="${name}"]`);
    const def = DEFINITIONS[name];
    const labels = def.labels(first);
    const data = [[], ...labels.map(() => [])];
    const target = section.querySelector(".chart");
    const plot = new uPlot(
      {
        width: Math.max(target.clientWidth, 280),
        height: 170,
        scales: {
          // At least a minute of time, and from zero up to at least 1 (ratios: to 1).
          x: { time: true, range: (_u, min, max) => (max - min < 60 ? [max - 60, max] : [min, max]) },
          y: { range: (_u, _min, max) => [0, name === "cache" ? 1.05 : Math.max(max || 0, 1) * 1.1] },
        },
        series: [{}, ...labels.map((label, i) => ({ label, stroke: COLORS[i % COLORS.length], width: 2 }))],
        legend: { live: false },
      },
      data,
      target,
    );
    return { section, def, labels, data, plot };
  }

  function describe(panel) {
    const parts = panel.labels.map((label, i) => {
      const values = panel.data[i + 1];
      const v = values[values.length - 1];
      return `${label} ${v === null || v === undefined ? "–" : round(v, 3)}${panel.def.unit}`;
    });
    const empty = panel.labels.every((_l, i) => panel.data[i + 1].every((v) => v === null));
    return empty ? `no ${panel.section.dataset.empty || "data"} recorded yet` : parts.join(" · ");
  }

  // The reading a point at `cur` is a rate from: the oldest within the window, else the
  // one before `cur`; for a panel the server's snapshots do not serve, a reading of its own.
  function baseOf(cur, def) {
    const usable = readings.filter((r) => r !== cur && r.at < cur.at && (def.past || !r.past));
    const within = usable.find((r) => r.at >= cur.at - WINDOW_S);
    return within || usable[usable.length - 1] || null;
  }

  function update(cur) {
    readings.push(cur);
    // Keep the window's readings, and always the latest full one (the gauges' base).
    while (readings.length > 2 && readings[0].at < cur.at - WINDOW_S * 4) readings.shift();
    for (const name of Object.keys(DEFINITIONS)) {
      if (!panels[name]) panels[name] = makePanel(name, cur);
      const panel = panels[name];
      if (cur.past && !panel.def.past) continue; // a snapshot holds no such figures
      const base = baseOf(cur, panel.def);
      const dt = base ? cur.at - base.at : 0;
      if (!panel.def.gauge && (!base || dt <= 0)) continue; // a rate needs two readings
      const values = panel.def.point(cur, base, dt, panel.labels);
      panel.data[0].push(cur.at);
      values.forEach((v, i) => panel.data[i + 1].push(v === null ? null : round(v, 4)));
      if (panel.data[0].length > MAX_POINTS) panel.data.forEach((series) => series.shift());
      panel.plot.setData(panel.data);
      const nonzero = panel.data.slice(1).flat().filter((v) => v !== null && v !== 0).length;
      panel.section.dataset.points = String(panel.data[0].length);
      panel.section.dataset.nonzero = String(nonzero);
      hsearch.text(panel.section.querySelector(".latest"), describe(panel));
    }
    const deps = Object.entries(cur.dependencies || {})
      .map(([name, up]) => `${name} ${up ? "up" : "DOWN"}`)
      .join(", ");
    hsearch.text(document.getElementById("dependencies"), deps ? `Dependencies: ${deps}.` : "");
    hsearch.text(document.getElementById("updated"), `Last reading ${new Date(cur.at * 1000).toLocaleTimeString()}.`);
    document.body.dataset.readings = String(readings.length);
  }

  // The first reading: panels made from it (its labels: jobs by state, queues), then the
  // server's snapshots drawn in order before it.
  function open(cur) {
    for (const name of Object.keys(DEFINITIONS)) panels[name] = makePanel(name, cur);
    for (const past of cur.history || []) update({ ...past, past: true });
    document.body.dataset.history = String((cur.history || []).length);
  }

  async function poll() {
    const error = document.getElementById("ops-error");
    try {
      const cur = await hsearch.request("GET", "/ops/api/dashboard");
      if (!readings.length) open(cur);
      update(cur);
      hsearch.text(error, "");
    } catch (err) {
      hsearch.text(error, `Could not read the figures: ${err.message}`);
    }
    window.setTimeout(poll, INTERVAL_MS);
  }

  hsearch.text(document.getElementById("interval"), `${INTERVAL_MS / 1000} s`);
  hsearch.text(document.getElementById("window"), `${WINDOW_S} s`);
  hsearch.header().catch(() => {});
  poll();
})();
