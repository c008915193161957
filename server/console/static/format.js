// Formatting and the rendering of record bytes (text, JSON or hex).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else el.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export const num = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"));

export function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(v < 10 ? 2 : 1)} ${units[u]}`;
}

export function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  const s = ms / 1000;
  if (s < 1) return `${Math.round(ms)} ms`;
  if (s < 120) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 86400) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

export const time = (ms) => (ms === null || ms === undefined ? "—" : new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC"));

// A value as the API renders it: a string (UTF-8 text) or {"base64": ...}; back to bytes.
export function toBytes(value) {
  if (value === null || value === undefined) return null;
  if (typeof value === "string") return new TextEncoder().encode(value);
  const raw = atob(value.base64);
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}

// "json" when the text parses as a JSON object or array, "text" for other text, "hex" for binary.
export function detectKind(value) {
  if (value === null || value === undefined) return "null";
  if (typeof value !== "string") return "hex";
  const t = value.trim();
  if ((t.startsWith("{") && t.endsWith("}")) || (t.startsWith("[") && t.endsWith("]"))) {
    try {
      JSON.parse(t);
      return "json";
    } catch {
      return "text";
    }
  }
  return "text";
}

export function hexdump(data) {
  const lines = [];
  for (let i = 0; i < data.length; i += 16) {
    const row = data.subarray(i, i + 16);
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(row, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${i.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${ascii}`);
  }
  return lines.join("\n") || "(empty)";
}

function highlightJson(text) {
  // Colour keys, strings and numbers; built from text nodes (no HTML from the record reaches innerHTML).
  const out = [];
  const re = /("(?:\\.|[^"\\])*")(\s*:)?|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|([^"\d-]+|-)/g;
  let m;
  while ((m = re.exec(text)) !== null) {
    if (m[1] !== undefined) {
      out.push(h("span", { class: m[2] ? "k" : "s" }, m[1]));
      if (m[2]) out.push(m[2]);
    } else if (m[3] !== undefined) out.push(h("span", { class: "n" }, m[3]));
    else out.push(m[4]);
  }
  return out;
}

// The <pre> showing `value` as `kind`.
export function renderValue(value, kind) {
  if (value === null || value === undefined) return h("pre", { class: "value muted" }, "null");
  if (kind === "json") {
    const pretty = JSON.stringify(JSON.parse(typeof value === "string" ? value : ""), null, 2);
    return h("pre", { class: "value json", "data-kind": "json" }, highlightJson(pretty));
  }
  if (kind === "hex") return h("pre", { class: "value hex", "data-kind": "hex" }, hexdump(toBytes(value)));
  const text = typeof value === "string" ? value : new TextDecoder("utf-8", { fatal: false }).decode(toBytes(value));
  return h("pre", { class: "value text", "data-kind": "text" }, text);
}

export function showValue(value) {
  if (value === null || value === undefined) return "null";
  return typeof value === "string" ? value : `base64:${value.base64}`;
}
