// Topics: every topic with its totals; one topic's partitions with storage, compaction lag and actions.
import { api, mapLimit } from "./api.js";
import { bytes, duration, h, num } from "./format.js";
import { confirmAction, errorBox, loading, notify, stat, table } from "./ui.js";

const STORAGE_READS_ON_LIST = 200; // more partitions than this: storage is read on the topic's own page only

const topicHref = (t) => `#/topics/${encodeURIComponent(t)}`;
const records = (p) => Math.max(0, p.high_watermark - p.log_start + 1);
const retention = (config, key, fmt) => (config && config[key] ? fmt(config[key]) : "default");

async function storageOf(topic, partitions) {
  return mapLimit(partitions, 6, (p) => api.storage(topic, p).catch(() => null));
}

export async function renderTopics(view) {
  view.append(h("h1", {}, "Topics"), loading("topics"));
  let listing;
  try {
    listing = (await api.topics()).topics;
  } catch (error) {
    view.replaceChildren(h("h1", {}, "Topics"), errorBox(error));
    return;
  }
  const described = await mapLimit(listing, 4, (t) => api.topic(t.topic).catch(() => null));
  const total = listing.reduce((n, t) => n + t.partitions.length, 0);
  const storage = total <= STORAGE_READS_ON_LIST ? await mapLimit(listing, 2, (t) => storageOf(t.topic, t.partitions)) : [];
  const rows = listing.map((t, i) => {
    const d = described[i];
    const parts = d ? d.partition_status : [];
    const st = (storage[i] || []).filter(Boolean);
    const sum = (key) => (st.length ? st.reduce((n, s) => n + s[key], 0) : null);
    const lagAge = st.length ? Math.max(0, ...st.map((s) => s.compaction_lag_ms || 0)) : null;
    const protocols = [...new Set(st.map((s) => s.append_protocol))];
    const protocol = d && d.config.append_protocol ? d.config.append_protocol : protocols.join(", ") || "—";
    return [
      h("a", { href: topicHref(t.topic) }, t.topic),
      h("span", { class: `badge ${t.explicit ? "ok" : ""}` }, t.explicit ? "explicit" : "implicit"),
      num(d ? d.partitions : t.partitions.length),
      num(parts.reduce((n, p) => n + records(p), 0)),
      bytes(sum("stored_bytes")),
      num(sum("compacted_objects")),
      num(sum("compaction_lag")),
      lagAge === null ? "—" : sum("compaction_lag") ? duration(lagAge) : "—",
      protocol,
      retention(d && d.config, "retention_ms", duration),
      retention(d && d.config, "retention_bytes", bytes),
    ];
  });
  const columns = [
    { label: "Topic" }, { label: "Kind" }, { label: "Partitions", num: true }, { label: "Records", num: true },
    { label: "Stored", num: true }, { label: "Compacted objects", num: true }, { label: "Compaction lag", num: true },
    { label: "Lag age", num: true }, { label: "Append protocol" }, { label: "Retention (time)" },
    { label: "Retention (size)" },
  ];
  view.replaceChildren(
    h("h1", {}, "Topics", h("span", { class: "sub" }, `${listing.length} topics · ${total} partitions`)),
    h("div", { class: "panel flush" }, table(columns, rows, { caption: "Topics", empty: "No topics yet: produce a record." })),
  );
}

export async function renderTopic(view, topic) {
  const crumbs = h("div", { class: "crumbs" }, h("a", { href: "#/topics" }, "Topics"), " / ", topic);
  view.append(crumbs, h("h1", {}, topic), loading("partitions"));
  let d;
  try {
    d = await api.topic(topic);
  } catch (error) {
    view.replaceChildren(crumbs, h("h1", {}, topic), errorBox(error));
    return;
  }
  const partitions = d.partition_status.map((p) => p.partition);
  const [storage, statuses] = await Promise.all([
    storageOf(topic, partitions),
    mapLimit(partitions, 6, (p) => api.partition(topic, p).catch(() => null)),
  ]);
  const cfg = d.config;
  const settings = h(
    "div",
    { class: "panel" },
    h(
      "div",
      { class: "stats" },
      stat("Partitions", num(d.partitions)),
      stat("Records", num(d.partition_status.reduce((n, p) => n + records(p), 0))),
      stat("Stored", bytes(storage.filter(Boolean).reduce((n, s) => n + s.stored_bytes, 0))),
      stat("Append protocol", cfg.append_protocol || "per partition"),
      stat("Retention (time)", retention(cfg, "retention_ms", duration)),
      stat("Retention (size)", retention(cfg, "retention_bytes", bytes)),
      stat("Kind", d.explicit ? "explicit" : "implicit"),
      stat("Topic id", d.topic_id || "—"),
    ),
  );
  const rows = d.partition_status.map((p, i) => {
    const s = storage[i];
    const status = statuses[i];
    const compact = h("button", { type: "button", class: "small", "data-compact": p.partition }, "Compact now");
    compact.addEventListener("click", () => compactPartition(topic, p.partition, compact));
    const stateClass = p.log_state === "OPEN" ? "ok" : p.log_state === "FENCED" ? "bad" : "warn";
    return [
      num(p.partition),
      h("span", { class: `badge ${stateClass}` }, p.log_state),
      num(p.log_start),
      num(p.high_watermark),
      num(records(p)),
      s ? bytes(s.stored_bytes) : "—",
      s ? num(s.compacted_objects) : "—",
      s ? num(s.wal_batches) : "—",
      num(status ? status.compaction_lag : s ? s.compaction_lag : null),
      s ? duration(s.compaction_lag_ms) : "—",
      s ? s.append_protocol : "—",
      h(
        "span",
        { class: "cell-actions" },
        h("a", { class: "button small", href: `${topicHref(topic)}/${p.partition}` }, "Browse records"),
        compact,
      ),
    ];
  });
  const columns = [
    { label: "Partition", num: true }, { label: "State" }, { label: "Log start", num: true },
    { label: "High watermark", num: true }, { label: "Records", num: true }, { label: "Stored", num: true },
    { label: "Compacted objects", num: true }, { label: "WAL batches", num: true },
    { label: "Compaction lag", num: true }, { label: "Lag age", num: true }, { label: "Protocol" }, { label: "" },
  ];
  view.replaceChildren(
    crumbs,
    h("h1", {}, topic),
    settings,
    h("div", { class: "panel flush" }, h("h2", {}, "Partitions"), table(columns, rows, { caption: `Partitions of ${topic}` })),
  );
}

async function compactPartition(topic, partition, button) {
  const ok = await confirmAction(
    `Compact ${topic}/${partition}?`,
    "Runs one bounded compaction pass now (up to 10 s), as the scheduled compactor would: the partition's WAL batches are rewritten into compacted objects. Reads and appends continue meanwhile.",
    "Compact",
  );
  if (!ok) return;
  button.disabled = true;
  button.textContent = "Compacting…";
  try {
    const result = await api.compact(topic, partition);
    notify(
      `Compacted ${num(result.records)} records of ${topic}/${partition} (${bytes(result.bytes_written)} written)` +
        (result.caught_up ? "; caught up." : "; more left: run it again."),
    );
    window.dispatchEvent(new HashChangeEvent("hashchange")); // re-read the partitions
  } catch (error) {
    notify(`Compaction failed: ${error.message}`, { error: true });
    button.disabled = false;
    button.textContent = "Compact now";
  }
}
