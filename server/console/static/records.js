// The record browser of one partition: pages from an offset, or from a time (POST /offsets).
import { api } from "./api.js";
import { detectKind, h, num, renderValue, showValue, time } from "./format.js";
import { errorBox, notify } from "./ui.js";

const PAGE_SIZES = [20, 50, 100, 200];
const FETCH_BYTES = 1024 * 1024;

// Up to `count` records from `offset`: /consume answers by bytes, so ask again until the page is full or the tail.
async function readPage(topic, partition, offset, count) {
  const records = [];
  let next = offset;
  let result;
  while (records.length < count) {
    result = (await api.consume(topic, partition, next, FETCH_BYTES)).results[0];
    if (!result.ok) {
      const error = new Error(`${result.error_type}: ${result.error}`);
      error.result = result;
      throw error;
    }
    records.push(...result.records);
    if (!result.records.length || result.next_fetch_offset > result.high_watermark) break;
    next = result.next_fetch_offset;
  }
  return { records: records.slice(0, count), hw: result.high_watermark, logStart: result.log_start_offset };
}

function recordRow(record) {
  const auto = detectKind(record.value);
  let kind = auto === "null" ? "text" : auto;
  const cell = h("td", { class: "value-cell" });
  const buttons = {};
  const seg = h("div", { class: "seg", role: "group", "aria-label": `Show offset ${record.offset} as` });
  const show = (k) => {
    kind = k;
    for (const [name, b] of Object.entries(buttons)) b.setAttribute("aria-pressed", String(name === k));
    let pre;
    try {
      pre = renderValue(record.value, k);
    } catch {
      pre = renderValue(record.value, "text"); // not JSON after all
    }
    cell.replaceChildren(controls, pre);
  };
  for (const [k, label] of [["text", "Text"], ["json", "JSON"], ["hex", "Hex"]]) {
    buttons[k] = h("button", { type: "button", "aria-pressed": "false", "data-kind": k, onclick: () => show(k) }, label);
    if (k === "json" && auto !== "json") buttons[k].disabled = true;
    seg.append(buttons[k]);
  }
  const copy = h("button", { type: "button", class: "small ghost", "data-copy": record.offset }, "Copy JSON");
  copy.addEventListener("click", async () => {
    const text = JSON.stringify(record, null, 2);
    try {
      await navigator.clipboard.writeText(text);
      notify(`Record ${record.offset} copied as JSON`);
    } catch {
      // No clipboard (an insecure origin, or denied): offer the text to select instead.
      const area = h("textarea", { "aria-label": `Record ${record.offset} as JSON`, readonly: true }, text);
      cell.append(area);
      area.select();
    }
  });
  const controls = h("div", { class: "controls" }, h("span", { class: "kind" }, `auto: ${auto}`), seg, copy);
  show(kind);
  const headers = Object.entries(record.headers || {});
  return h(
    "tr",
    { "data-offset": record.offset },
    h("td", { class: "num nowrap" }, num(record.offset)),
    h("td", { class: "nowrap mono" }, time(record.timestamp_ms)),
    h("td", { class: "mono" }, record.key === null ? h("span", { class: "muted" }, "null") : showValue(record.key)),
    h(
      "td",
      { class: "headers mono" },
      headers.length ? headers.map(([k, v]) => h("div", {}, `${k}: ${showValue(v)}`)) : h("span", { class: "muted" }, "—"),
    ),
    cell,
  );
}

export async function renderRecords(view, topic, partition, ctx) {
  const params = ctx.params;
  let size = Number(params.get("size")) || 50;
  const crumbs = h(
    "div",
    { class: "crumbs" },
    h("a", { href: "#/topics" }, "Topics"),
    " / ",
    h("a", { href: `#/topics/${encodeURIComponent(topic)}` }, topic),
    ` / partition ${partition}`,
  );
  const offsetInput = h("input", { id: "from-offset", type: "number", min: "0", inputmode: "numeric" });
  const timeInput = h("input", { id: "from-time", type: "datetime-local", step: "1" });
  const sizeSelect = h("select", { id: "page-size" }, PAGE_SIZES.map((n) => h("option", { value: n, selected: n === size }, n)));
  const summary = h("p", { class: "muted", id: "page-summary", "aria-live": "polite" });
  const body = h("div", { class: "panel flush" });
  const buttons = {
    first: h("button", { type: "button" }, "⇤ First"),
    prev: h("button", { type: "button" }, "‹ Previous"),
    next: h("button", { type: "button" }, "Next ›"),
    last: h("button", { type: "button" }, "Latest ⇥"),
  };
  const offsetForm = h(
    "form",
    { class: "field" },
    h("label", { for: "from-offset" }, "From offset"),
    h("span", { class: "row" }, offsetInput, h("button", { type: "submit" }, "Go")),
  );
  const timeForm = h(
    "form",
    { class: "field" },
    h("label", { for: "from-time" }, "From time (local)"),
    h("span", { class: "row" }, timeInput, h("button", { type: "submit" }, "Go")),
  );
  view.append(
    crumbs,
    h("h1", {}, `${topic}`, h("span", { class: "sub" }, `partition ${partition} · records`)),
    h(
      "div",
      { class: "toolbar panel" },
      offsetForm,
      timeForm,
      h("div", { class: "field" }, h("label", { for: "page-size" }, "Per page"), sizeSelect),
      h("div", { class: "spacer" }),
      h("div", { class: "row", role: "group", "aria-label": "Pages" }, Object.values(buttons)),
    ),
    summary,
    body,
  );

  let state = { start: null, hw: 0, logStart: 1, count: 0 };
  async function load(offset) {
    summary.textContent = "Loading…";
    let page;
    try {
      page = await readPage(topic, partition, Math.max(offset, 0), size);
    } catch (error) {
      const r = error.result;
      if (r && r.error_type === "OffsetOutOfRange" && offset !== r.log_start_offset) {
        notify(`Offset ${offset} is out of range; showing from ${r.log_start_offset}`);
        return load(r.log_start_offset);
      }
      summary.textContent = "";
      body.replaceChildren(errorBox(error));
      return;
    }
    state = { start: offset, hw: page.hw, logStart: page.logStart, count: page.records.length };
    offsetInput.value = offset;
    const last = page.records.length ? page.records[page.records.length - 1].offset : null;
    summary.textContent = page.records.length
      ? `Offsets ${num(page.records[0].offset)}–${num(last)} of ${num(page.logStart)}–${num(page.hw)}`
      : `No records from offset ${num(offset)} (readable: ${num(page.logStart)}–${num(page.hw)})`;
    buttons.first.disabled = buttons.prev.disabled = offset <= page.logStart;
    buttons.next.disabled = last === null || last >= page.hw;
    buttons.last.disabled = last !== null && last >= page.hw;
    const rows = page.records.map(recordRow);
    const head = h(
      "tr",
      {},
      ["Offset", "Timestamp", "Key", "Headers", "Value"].map((c, i) => h("th", { scope: "col", class: i === 0 ? "num" : null }, c)),
    );
    body.replaceChildren(
      rows.length
        ? h("table", { class: "records" }, h("thead", {}, head), h("tbody", {}, rows))
        : h("div", { class: "empty" }, "No records here."),
    );
    history.replaceState(null, "", `#/topics/${encodeURIComponent(topic)}/${partition}?offset=${offset}&size=${size}`);
  }

  buttons.first.addEventListener("click", () => load(state.logStart));
  buttons.prev.addEventListener("click", () => load(Math.max(state.logStart, state.start - size)));
  buttons.next.addEventListener("click", () => load(state.start + state.count));
  buttons.last.addEventListener("click", () => load(Math.max(state.logStart, state.hw - size + 1)));
  sizeSelect.addEventListener("change", () => {
    size = Number(sizeSelect.value);
    load(state.start ?? 1);
  });
  offsetForm.addEventListener("submit", (event) => {
    event.preventDefault();
    load(Number(offsetInput.value));
  });
  timeForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!timeInput.value) return;
    const timestamp = new Date(timeInput.value).getTime();
    try {
      const found = (await api.offsetFor(topic, partition, timestamp)).results[0];
      if (!found.ok) throw new Error(`${found.error_type}: ${found.error}`);
      load(found.offset);
    } catch (error) {
      notify(`No offset for that time: ${error.message}`, { error: true });
    }
  });
  await load(params.has("offset") ? Number(params.get("offset")) : 1);
}
