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

// A key llog issued (llog keys create), for an llog serve with LLOG_SERVE_AUTH=sigv4: kept for this tab only.
const SIGNING_KEY = "llog.console.signing";

export function signingKey() {
  try {
    const saved = JSON.parse(sessionStorage.getItem(SIGNING_KEY) || "{}");
    return { id: saved.id || "", secret: saved.secret || "" };
  } catch {
    return { id: "", secret: "" };
  }
}

export function saveSigningKey(id, secret) {
  if (id && secret) sessionStorage.setItem(SIGNING_KEY, JSON.stringify({ id, secret }));
  else sessionStorage.removeItem(SIGNING_KEY);
}

const utf8 = new TextEncoder();
const toHex = (buffer) => [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, "0")).join("");
const sha256 = async (data) => toHex(await crypto.subtle.digest("SHA-256", data));
async function hmac(key, text) {
  const imported = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return crypto.subtle.sign("HMAC", imported, utf8.encode(text));
}
// RFC 3986 unreserved characters stay; everything else is percent-encoded, as the signature's canonical form asks.
const uriEncode = (text) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

// AWS Signature Version 4 of one request, for service "llog" (server/auth.py checks it): the headers to add.
export async function sigv4Headers(method, url, headers, body, key, now = new Date()) {
  const target = new URL(url, location.href);
  const amzDate = now.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}/, "");
  const day = amzDate.slice(0, 8);
  const region = "us-east-1";
  const scope = `${day}/${region}/llog/aws4_request`;
  const signed = { ...Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])), host: target.host, "x-amz-date": amzDate };
  const names = Object.keys(signed).sort();
  const path = target.pathname.split("/").map(uriEncode).join("/");
  const query = [...target.searchParams].map(([k, v]) => `${uriEncode(k)}=${uriEncode(v)}`).sort().join("&");
  const canonical = [method, path, query, names.map((n) => `${n}:${String(signed[n]).trim().replace(/\s+/g, " ")}\n`).join(""),
    names.join(";"), await sha256(utf8.encode(body || ""))].join("\n");
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, await sha256(utf8.encode(canonical))].join("\n");
  let signingKey = utf8.encode(`AWS4${key.secret}`);
  for (const part of [day, region, "llog", "aws4_request"]) signingKey = await hmac(signingKey, part);
  const signature = toHex(await hmac(signingKey, toSign));
  return {
    "x-amz-date": amzDate,
    authorization: `AWS4-HMAC-SHA256 Credential=${key.id}/${scope}, SignedHeaders=${names.join(";")}, Signature=${signature}`,
  };
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
  const bodyText = body === undefined ? undefined : JSON.stringify(body);
  const signing = signingKey();
  if (signing.id) Object.assign(headers, await sigv4Headers(method, base + path, headers, bodyText, signing));
  let response;
  try {
    response = await fetch(base + path, { method, headers, body: bodyText });
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
