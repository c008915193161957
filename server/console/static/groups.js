// Consumer groups: members, assignments, committed offsets and lag, refreshed; a lag that grew is highlighted.
import { api, mapLimit } from "./api.js";
import { duration, h, num } from "./format.js";
import { errorBox, loading, table } from "./ui.js";

const REFRESH_MS = 5000;
const previousLag = new Map(); // "group/topic/partition" -> lag at the last refresh (kept across visits)

function assignmentText(assignments) {
  return (assignments || []).map((a) => `${a.topic}: ${a.partitions.join(", ") || "—"}`).join("; ") || "—";
}

function groupPanel(g) {
  const now = Date.now();
  const members = g.members.map((m) => [
    h("span", { class: "mono" }, m.member_id),
    (m.topics || []).join(", "),
    assignmentText(m.assignments),
    m.expires_at_ms ? `in ${duration(Math.max(0, m.expires_at_ms - now))}` : "—",
  ]);
  const offsets = g.offsets.map((o) => {
    const key = `${g.group}/${o.topic}/${o.partition}`;
    const before = previousLag.get(key);
    const growing = o.lag !== null && before !== undefined && before !== null && o.lag > before;
    previousLag.set(key, o.lag);
    const lag = h(
      "span",
      { class: growing ? "lag-growing" : null, "data-lag": key, title: growing ? `grew from ${before}` : null },
      num(o.lag),
    );
    return [
      h("a", { href: `#/topics/${encodeURIComponent(o.topic)}/${o.partition}?offset=${o.committed ?? o.log_start}` }, o.topic),
      num(o.partition),
      num(o.committed),
      num(o.log_start),
      num(o.high_watermark),
      lag,
      o.below_log_start ? h("span", { class: "badge bad" }, "below log start") : "",
    ];
  });
  return h(
    "section",
    { class: "panel", "aria-labelledby": `group-${g.group}` },
    h("h2", { id: `group-${g.group}` }, g.group, h("span", { class: "muted" }, ` · generation ${g.generation} · ${g.members.length} members`)),
    table([{ label: "Member" }, { label: "Topics" }, { label: "Assignment" }, { label: "Session expires" }], members, {
      caption: `Members of ${g.group}`,
      empty: "No members: the group only keeps its offsets.",
    }),
    h("h2", { style: "margin-top:16px" }, "Committed offsets"),
    table(
      [
        { label: "Topic" }, { label: "Partition", num: true }, { label: "Committed", num: true },
        { label: "Log start", num: true }, { label: "High watermark", num: true }, { label: "Lag", num: true },
        { label: "" },
      ],
      offsets,
      { caption: `Offsets of ${g.group}`, empty: "No partitions." },
    ),
  );
}

export async function renderGroups(view, ctx) {
  const title = h("h1", {}, "Consumer groups");
  const stamp = h("p", { class: "muted", "aria-live": "off" });
  const list = h("div", {}, loading("groups"));
  view.append(title, stamp, list);
  async function refresh() {
    try {
      const names = (await api.groups()).groups;
      const groups = (await mapLimit(names, 4, (g) => api.group(g).catch(() => null))).filter(Boolean);
      list.replaceChildren(...(groups.length ? groups.map(groupPanel) : [h("div", { class: "panel empty" }, "No consumer groups.")]));
      stamp.textContent = `Refreshed ${new Date().toLocaleTimeString()} · every ${REFRESH_MS / 1000} s · a lag that grew since the last refresh is marked ▲`;
    } catch (error) {
      list.replaceChildren(errorBox(error));
    }
  }
  await refresh();
  const timer = setInterval(refresh, REFRESH_MS);
  ctx.onLeave(() => clearInterval(timer));
}
