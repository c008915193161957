// Live charts of llog serve's /metrics: the page samples it from load on and keeps the last 15 minutes.
import { api } from "./api.js";
import { h } from "./format.js";
import { errorBox, stat } from "./ui.js";

const WINDOW_S = 15 * 60;
const SAMPLE_MS = Number(new URLSearchParams(location.search).get("sample_ms")) || 2000;
const samples = []; // {t: seconds, m: the /metrics document}
const listeners = new Set();
let lastError = null;

async function sample() {
  try {
    const m = await api.metrics();
    samples.push({ t: Date.now() / 1000, m });
    while (samples.length && samples[0].t < samples[samples.length - 1].t - WINDOW_S) samples.shift();
    lastError = null;
  } catch (error) {
    lastError = error;
  }
  for (const fn of listeners) fn();
}

export function startSampler() {
  sample();
  setInterval(sample, SAMPLE_MS);
}

const sumCalls = (ops) => Object.entries(ops || {}).reduce((n, [op, s]) => n + (op === "billing" ? 0 : s.calls || 0), 0);

function latencyCounts(m, route) {
  const found = ((m.http && m.http.latency && m.http.latency.routes) || []).find((r) => r.method === "POST" && r.route === route);
  return found ? found.counts : null;
}

// The q-quantile of a window's histogram (counts per bucket), interpolated within its bucket.
function quantile(bounds, counts, q) {
  const total = counts.reduce((a, b) => a + b, 0);
  if (!total) return null;
  const target = q * total;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    if (seen + counts[i] >= target && counts[i] > 0) {
      const lo = i === 0 ? 0 : bounds[i - 1];
      const hi = i < bounds.length ? bounds[i] : bounds[bounds.length - 1];
      return lo + ((hi - lo) * (target - seen)) / counts[i];
    }
    seen += counts[i];
  }
  return bounds[bounds.length - 1];
}

function windowLatency(a, b, route, q) {
  const before = latencyCounts(a.m, route);
  const after = latencyCounts(b.m, route);
  if (!after) return null;
  const delta = after.map((n, i) => n - (before ? before[i] : 0));
  if (delta.some((n) => n < 0)) return null; // the server restarted
  return quantile(b.m.http.latency.bounds_ms, delta, q);
}

// One value per sample interval; null where the counters went backwards (a restart).
function rate(a, b, get, scale = 1) {
  const dt = b.t - a.t;
  const d = get(b.m) - get(a.m);
  return dt > 0 && d >= 0 ? (d / dt) * scale : null;
}

const SERIES = {
  records: {
    title: "Records per second",
    unit: "records/s",
    lines: [
      ["Produced", (a, b) => rate(a, b, (m) => m.records.produced_records)],
      ["Consumed", (a, b) => rate(a, b, (m) => m.records.consumed_records)],
    ],
  },
  bytes: {
    title: "Throughput",
    unit: "MB/s",
    lines: [
      ["Produced", (a, b) => rate(a, b, (m) => m.records.produced_bytes, 1e-6)],
      ["Consumed", (a, b) => rate(a, b, (m) => m.records.consumed_bytes, 1e-6)],
    ],
  },
  latency: {
    title: "Request latency",
    unit: "ms",
    lines: [
      ["Produce p50", (a, b) => windowLatency(a, b, "/produce", 0.5)],
      ["Produce p99", (a, b) => windowLatency(a, b, "/produce", 0.99)],
      ["Consume p50", (a, b) => windowLatency(a, b, "/consume", 0.5)],
      ["Consume p99", (a, b) => windowLatency(a, b, "/consume", 0.99)],
    ],
  },
  ops: {
    title: "Storage operations",
    unit: "ops/s",
    lines: [
      ["S3", (a, b) => rate(a, b, (m) => sumCalls(m.s3))],
      ["Oxia", (a, b) => rate(a, b, (m) => sumCalls(m.oxia))],
    ],
  },
  cost: {
    title: "S3 request cost (estimate)",
    unit: "USD/hour",
    lines: [["Requests", (a, b) => rate(a, b, (m) => m.s3.billing.request_cost_usd, 3600)]],
  },
};

function chartData(spec) {
  const xs = [];
  const ys = spec.lines.map(() => []);
  for (let i = 1; i < samples.length; i++) {
    xs.push(samples[i].t);
    spec.lines.forEach(([, fn], j) => ys[j].push(fn(samples[i - 1], samples[i])));
  }
  return [xs, ...ys];
}

function palette() {
  const css = getComputedStyle(document.documentElement);
  const dark = document.documentElement.dataset.theme === "dark";
  return {
    axis: css.getPropertyValue("--muted").trim(),
    grid: css.getPropertyValue("--border").trim(),
    lines: dark ? ["#4c9ffe", "#f0883e", "#56d364", "#d2a8ff"] : ["#0b5cad", "#c4501b", "#1a7f37", "#8250df"],
  };
}

function makeChart(uPlot, spec, target) {
  const colors = palette();
  const axis = (label, extra = {}) => ({
    label,
    stroke: colors.axis,
    grid: { stroke: colors.grid, width: 1 },
    ticks: { stroke: colors.grid, width: 1 },
    labelFont: "600 12px system-ui, sans-serif",
    font: "12px system-ui, sans-serif",
    ...extra,
  });
  const fmt = (v) => (v === null || v === undefined ? "—" : v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v.toPrecision(2));
  const opts = {
    width: Math.max(320, target.clientWidth - 8),
    height: 220,
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max * 1.15 || 0, 1e-9)] } },
    axes: [
      axis("local time", { values: (u, vals) => vals.map((v) => new Date(v * 1000).toLocaleTimeString([], { hour12: false })) }),
      axis(spec.unit, { size: 64, values: (u, vals) => vals.map(fmt) }),
    ],
    series: [
      { label: "local time" },
      ...spec.lines.map(([label], i) => ({
        label,
        stroke: colors.lines[i],
        width: i % 2 && spec.lines.length === 4 ? 1.5 : 2,
        dash: i % 2 && spec.lines.length === 4 ? [6, 4] : undefined,
        points: { show: true, size: 4 },
        value: (u, v) => `${fmt(v)} ${spec.unit}`,
        spanGaps: false,
      })),
    ],
    legend: { live: false },
  };
  return new uPlot(opts, chartData(spec), target);
}

function stats(m) {
  const billing = m.s3.billing;
  const storage = billing.storage || {};
  const usd = (v, digits = 4) => (v === null || v === undefined ? "—" : `$${Number(v).toFixed(digits)}`);
  return h(
    "div",
    { class: "stats" },
    stat("S3 requests cost (since start)", usd(billing.request_cost_usd)),
    stat("S3 storage (monthly)", usd(storage.monthly_cost_usd, 2)),
    stat("Stored objects", storage.objects === null || storage.objects === undefined ? "—" : storage.objects.toLocaleString("en-US")),
    stat("Samples", `${samples.length} · every ${SAMPLE_MS / 1000} s`),
  );
}

export async function renderMetrics(view, ctx) {
  view.append(h("h1", {}, "Metrics", h("span", { class: "sub" }, "this llog serve, last 15 minutes")));
  let uPlot;
  try {
    uPlot = (await import("/console/vendor/uPlot.esm.js")).default;
  } catch {
    view.append(h("div", { class: "note" }, "uPlot is not installed: run make setup (npm ci) to see the charts."));
    return;
  }
  const statsBox = h("div", { class: "panel", id: "metric-stats" });
  const note = h("div", {});
  const grid = h("div", { class: "grid" });
  view.append(note, statsBox, grid);
  const charts = Object.entries(SERIES).map(([id, spec]) => {
    const target = h("div", { class: "chart", id: `chart-${id}`, role: "img", "aria-label": `${spec.title} chart, ${spec.unit}` });
    grid.append(h("section", { class: "panel" }, h("h2", {}, spec.title, h("span", { class: "muted" }, ` (${spec.unit})`)), target));
    return { spec, target, plot: null };
  });
  function draw() {
    if (lastError && !samples.length) {
      note.replaceChildren(
        errorBox(lastError),
        h("p", { class: "muted" }, "/metrics is served by llog serve only; a deployed stack's metrics are in CloudWatch (docs/CONSOLE.md)."),
      );
      return;
    }
    note.replaceChildren();
    if (samples.length) statsBox.replaceChildren(stats(samples[samples.length - 1].m));
    for (const c of charts) {
      if (!c.plot) c.plot = c.target.uplot = makeChart(uPlot, c.spec, c.target); // .uplot: for tests and the devtools
      else c.plot.setData(chartData(c.spec));
      c.target.dataset.points = String(Math.max(0, samples.length - 1));
    }
  }
  const onResize = () => charts.forEach((c) => c.plot && c.plot.setSize({ width: Math.max(320, c.target.clientWidth - 8), height: 220 }));
  draw();
  listeners.add(draw);
  window.addEventListener("resize", onResize);
  ctx.onLeave(() => {
    listeners.delete(draw);
    window.removeEventListener("resize", onResize);
  });
}
