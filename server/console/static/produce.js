// Produce one record: topic, partition or key, value (and optional headers).
import { api } from "./api.js";
import { h, num } from "./format.js";
import { errorBox } from "./ui.js";

export async function renderProduce(view) {
  const topics = await api.topics().then((d) => d.topics.map((t) => t.topic)).catch(() => []);
  const field = (id, label, input, hint) =>
    h("div", { class: "field" }, h("label", { for: id }, label), input, hint ? h("div", { class: "hint", id: `${id}-hint` }, hint) : null);
  const form = h(
    "form",
    { class: "panel form", id: "produce-form" },
    h(
      "div",
      { class: "row" },
      field("produce-topic", "Topic", h("input", { id: "produce-topic", name: "topic", required: true, list: "topic-names", autocomplete: "off" })),
      h("div", { class: "field narrow" }, h("label", { for: "produce-partition" }, "Partition"),
        h("input", { id: "produce-partition", name: "partition", type: "number", min: "0", "aria-describedby": "produce-partition-hint" })),
      field("produce-key", "Key", h("input", { id: "produce-key", name: "key", autocomplete: "off" })),
    ),
    h("div", { class: "hint", id: "produce-partition-hint" }, "Leave the partition empty to route by key (or spread records without a key)."),
    field("produce-value", "Value", h("textarea", { id: "produce-value", name: "value", required: true, spellcheck: "false" })),
    field(
      "produce-headers",
      "Headers (optional, one name=value a line)",
      h("textarea", { id: "produce-headers", name: "headers", spellcheck: "false", style: "min-height:60px" }),
    ),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Produce")),
  );
  const result = h("div", { id: "produce-result", "aria-live": "polite" });
  view.append(h("h1", {}, "Produce a record"), h("datalist", { id: "topic-names" }, topics.map((t) => h("option", { value: t }))), form, result);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const record = { value: data.get("value") };
    if (data.get("key")) record.key = data.get("key");
    const headers = {};
    for (const line of String(data.get("headers") || "").split("\n")) {
      const at = line.indexOf("=");
      if (at > 0) headers[line.slice(0, at).trim()] = line.slice(at + 1);
    }
    if (Object.keys(headers).length) record.headers = headers;
    const entry = { topic: String(data.get("topic")).trim(), records: [record] };
    if (data.get("partition") !== "") entry.partition = Number(data.get("partition"));
    try {
      const answer = await api.produce(entry);
      const r = answer.results[0];
      if (!r.ok) throw new Error(`${r.error_type}: ${r.error}`);
      const href = `#/topics/${encodeURIComponent(r.topic)}/${r.partition}?offset=${r.start_offset}`;
      result.replaceChildren(
        h("div", { class: "panel", role: "status" }, `Written to ${r.topic}/${r.partition} at offset ${num(r.start_offset)}. `,
          h("a", { href, id: "produced-link" }, "Show it in the record browser")),
      );
    } catch (error) {
      result.replaceChildren(errorBox(error));
    }
  });
}
