// The HTTP API, from this page: llog serve by default, or a deployed stack (base URL + x-api-key).
const SETTINGS_KEY = "llog.console.connection";

export function connection() {
  try {
    const saved = JSON.parse(localStorage.getItem(SETTINGS_KEY) || "{}");
    return { base: saved.base || "", key: saved.key || "" };
  } catch {
    return { base: "", key: "" };
  }
}

export function saveConnection(base, key) {
  localStorage.setItem(SETTINGS_KEY, JSON.stringify({ base: base.replace(/\/+$/, ""), key }));
}

export class ApiError extends Error {
  constructor(status, body) {
    const message = body && body.error ? `${body.error_type || "Error"}: ${body.error}` : `HTTP ${status}`;
    super(message);
    this.status = status;
    this.body = body;
  }
}

export async function request(method, path, body) {
  const { base, key } = connection();
  const headers = {};
  // Every request that changes something says JSON, a body or not: the server refuses one that does not, as any
  // page of any site could make the browser send it (functions/common/browser.py).
  if (body !== undefined || method !== "GET") headers["content-type"] = "application/json";
  if (key) headers["x-api-key"] = key;
  let response;
  try {
    response = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (error) {
    // A network failure, or (against another origin) an answer without CORS headers.
    throw new ApiError(0, { error_type: "NetworkError", error: `${method} ${base + path}: ${error.message}` });
  }
  const text = await response.text();
  let doc = null;
  try {
    doc = text ? JSON.parse(text) : null;
  } catch {
    doc = { error_type: "NotJson", error: text.slice(0, 200) };
  }
  if (!response.ok) throw new ApiError(response.status, doc);
  return doc;
}

const enc = encodeURIComponent;
export const api = {
  topics: () => request("GET", "/topics"),
  topic: (t) => request("GET", `/topics/${enc(t)}`),
  partition: (t, p) => request("GET", `/topics/${enc(t)}/partitions/${p}`),
  storage: (t, p) => request("GET", `/topics/${enc(t)}/partitions/${p}/storage`),
  compact: (t, p) => request("POST", `/topics/${enc(t)}/partitions/${p}/compact`),
  groups: () => request("GET", "/groups"),
  group: (g) => request("GET", `/groups/${enc(g)}`),
  metrics: () => request("GET", "/metrics"),
  produce: (entry) => request("POST", "/produce", { topic_partitions: [entry] }),
  consume: (t, p, offset, maxBytes) =>
    request("POST", "/consume", {
      topic_partitions: [{ topic: t, partition: p, fetch_offset: offset, partition_max_bytes: maxBytes }],
      max_wait_ms: 0,
      max_bytes: maxBytes,
    }),
  offsetFor: (t, p, timestamp) =>
    request("POST", "/offsets", { topic_partitions: [{ topic: t, partition: p, timestamp_ms: timestamp }] }),
};

// Runs fn over items, at most `limit` at once, in order of the results.
export async function mapLimit(items, limit, fn) {
  const out = new Array(items.length);
  let next = 0;
  async function worker() {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
