// Small shared pieces of the views.
import { h } from "./format.js";

export function errorBox(error) {
  return h("div", { class: "error-box", role: "alert" }, error.message || String(error));
}

export function loading(what) {
  return h("p", { class: "muted", "aria-busy": "true" }, `Loading ${what}…`);
}

export function stat(label, value) {
  return h("div", { class: "stat" }, h("div", { class: "label" }, label), h("div", { class: "v" }, value));
}

// A table: columns [{label, num?}], rows of cells (strings or nodes).
export function table(columns, rows, { caption, empty = "Nothing here yet." } = {}) {
  const head = h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : null }, c.label)));
  const body = rows.map((cells) =>
    h("tr", {}, cells.map((cell, i) => h("td", { class: columns[i].num ? "num" : columns[i].class || null }, cell))),
  );
  const t = h("table", {}, caption ? h("caption", { class: "skip" }, caption) : null, h("thead", {}, head), h("tbody", {}, body));
  return rows.length ? t : h("div", {}, t, h("div", { class: "empty" }, empty));
}

// A modal confirmation; resolves true when confirmed.
export function confirmAction(title, text, confirmLabel) {
  return new Promise((resolve) => {
    const dialog = h(
      "dialog",
      { "aria-labelledby": "confirm-title", class: "confirm" },
      h(
        "form",
        { method: "dialog" },
        h("h2", { id: "confirm-title" }, title),
        h("p", {}, text),
        h(
          "div",
          { class: "actions" },
          h("button", { type: "submit", value: "yes", class: "primary" }, confirmLabel),
          h("button", { type: "submit", value: "no", autofocus: true }, "Cancel"),
        ),
      ),
    );
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(dialog.returnValue === "yes");
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

export function notify(message, { error = false } = {}) {
  const box = document.getElementById("status");
  box.textContent = message;
  box.className = error ? "toast error" : "toast";
  box.hidden = false;
  clearTimeout(notify.timer);
  notify.timer = setTimeout(() => (box.hidden = true), error ? 8000 : 4000);
}
