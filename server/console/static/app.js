// The console's shell: hash routes, the connection dialog, the theme, notices.
import { connection, saveConnection, saveSigningKey, signingKey } from "./api.js";
import { renderGroups } from "./groups.js";
import { renderMetrics, startSampler } from "./metrics.js";
import { renderProduce } from "./produce.js";
import { renderRecords } from "./records.js";
import { renderTopic, renderTopics } from "./topics.js";

const main = document.getElementById("main");
let cleanup = null;

// #/topics, #/topics/<topic>, #/topics/<topic>/<partition>[?offset=N], #/groups, #/metrics, #/produce
function parseRoute() {
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts: parts.length ? parts : ["topics"], params: new URLSearchParams(query || "") };
}

async function route() {
  if (cleanup) cleanup();
  cleanup = null;
  const { parts, params } = parseRoute();
  const section = parts[0];
  for (const link of document.querySelectorAll("[data-nav]")) {
    if (link.dataset.nav === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  main.replaceChildren();
  const view = document.createElement("div");
  main.append(view);
  const ctx = { params, onLeave: (fn) => (cleanup = fn) };
  if (section === "topics" && parts.length === 1) await renderTopics(view, ctx);
  else if (section === "topics" && parts.length === 2) await renderTopic(view, parts[1], ctx);
  else if (section === "topics" && parts.length === 3) await renderRecords(view, parts[1], Number(parts[2]), ctx);
  else if (section === "groups") await renderGroups(view, ctx);
  else if (section === "metrics") await renderMetrics(view, ctx);
  else if (section === "produce") await renderProduce(view, ctx);
  else view.append("Unknown page.");
}

function showEndpoint() {
  const { base, key } = connection();
  const signed = signingKey().id ? ` · signed by ${signingKey().id}` : "";
  document.getElementById("endpoint").textContent = `${base || location.origin}${key ? " · API key" : ""}${signed}`;
}

function setupSettings() {
  const dialog = document.getElementById("settings");
  const form = document.getElementById("settings-form");
  document.getElementById("open-settings").addEventListener("click", () => {
    const { base, key } = connection();
    form.base.value = base;
    form.key.value = key;
    form.keyId.value = signingKey().id;
    form.keySecret.value = signingKey().secret;
    dialog.showModal();
  });
  dialog.addEventListener("close", () => {
    if (dialog.returnValue !== "save") return;
    saveConnection(form.base.value.trim(), form.key.value.trim());
    saveSigningKey(form.keyId.value.trim(), form.keySecret.value.trim());
    showEndpoint();
    route();
  });
}

function setupTheme() {
  const root = document.documentElement;
  const saved = localStorage.getItem("llog.console.theme");
  const dark = saved ? saved === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
  root.dataset.theme = dark ? "dark" : "light";
  document.getElementById("theme").addEventListener("click", () => {
    root.dataset.theme = root.dataset.theme === "dark" ? "light" : "dark";
    localStorage.setItem("llog.console.theme", root.dataset.theme);
    route(); // charts take their colours when drawn
  });
}

setupTheme();
setupSettings();
showEndpoint();
startSampler();
window.addEventListener("hashchange", route);
route();
