// The History tab: every claim verified on this server, searched, opened, exported and deleted.
// Uses app.js's el, $, api, keyHeaders, labelBadge and renderResult; every string goes in as text.
"use strict";

const historyState = { page: 1, pages: 1, seq: 0, openSeq: 0, timer: null };

function historyParams() {
  const params = new URLSearchParams();
  const add = (key, id) => { if ($(id).value) params.set(key, $(id).value); };
  add("q", "h-q");
  add("config", "h-config");
  add("label", "h-label");
  add("source", "h-source");
  return params;
}

async function loadHistory() {
  const seq = ++historyState.seq; // only the newest request may render (an older one can arrive last)
  const params = historyParams();
  params.set("page", historyState.page);
  params.set("page_size", 20);
  let data;
  try {
    data = await api(`/v1/history?${params}`);
  } catch (e) {
    if (seq === historyState.seq) {
      $("history-count").textContent = e.message;
      $("history-table").tBodies[0].replaceChildren();
    }
    return;
  }
  if (seq !== historyState.seq) return;
  historyState.pages = data.pages;
  const sel = $("h-config");
  const chosen = sel.value;
  sel.replaceChildren(el("option", { value: "", text: "any" }), ...data.configs.map((c) => el("option", { value: c, text: c })));
  sel.value = chosen;
  $("history-count").textContent = `${data.total} verification${data.total === 1 ? "" : "s"}`;
  $("h-page-info").textContent = ` page ${data.page} of ${data.pages} `;
  $("history-table").tBodies[0].replaceChildren(...data.items.map((h) =>
    el("tr", { class: "history-row", "data-id": h.id, onclick: () => openHistory(h.id) },
      el("td", { text: new Date(h.created).toLocaleString(), title: h.created }),
      el("td", { text: h.source }), el("td", { text: h.config }),
      el("td", {}, el("code", { text: h.index_version || "?" })),
      el("td", { class: "claim-text", text: h.claim }), el("td", {}, labelBadge(h.label)))));
}

async function openHistory(id) {
  const box = $("history-detail");
  const seq = ++historyState.openSeq; // the entry clicked last is the one shown
  let h;
  try {
    h = await api(`/v1/history/${encodeURIComponent(id)}`);
  } catch (e) {
    if (seq === historyState.openSeq) box.replaceChildren(el("p", { class: "error", text: e.message }));
    return;
  }
  if (seq !== historyState.openSeq) return;
  const del = el("button", { type: "button", id: "h-delete", onclick: async () => {
    const res = await fetch(`/v1/history/${encodeURIComponent(id)}`, { method: "DELETE", headers: keyHeaders() });
    if (res.ok) {
      box.replaceChildren(el("p", { class: "hint", text: `entry ${id} deleted` }));
      loadHistory();
    } else {
      box.append(el("p", { class: "error", text: `${res.status}: could not delete entry ${id}` }));
    }
  } }, "Delete this entry");
  const holder = el("div", { class: "columns" });
  box.replaceChildren(el("h2", {}, `Entry ${h.id}: `, el("span", { class: "claim-text", text: h.claim })),
    el("p", { class: "hint", text: `${new Date(h.created).toLocaleString()} · ${h.source} · config ${h.config} · corpus ${h.index_version || "?"}${h.k ? ` · k ${h.k}` : ""}` }),
    holder, del);
  holder.append(renderResult(h.response)); // in the page first: the graph is drawn on the next tick
  box.scrollIntoView({ block: "nearest" });
}

async function exportHistory(format) {
  const params = historyParams();
  params.set("format", format);
  const res = await fetch(`/v1/history/export?${params}`, { headers: keyHeaders() });
  if (!res.ok) {
    $("history-count").textContent = `${res.status}: export failed`;
    return;
  }
  const name = (res.headers.get("content-disposition") || "").match(/filename="([^"]+)"/);
  const url = URL.createObjectURL(await res.blob());
  const a = el("a", { href: url, download: name ? name[1] : `garag-history.${format}` });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

document.addEventListener("DOMContentLoaded", () => {
  const reload = () => { historyState.page = 1; loadHistory(); };
  $("tab-history").addEventListener("click", reload);
  // The text box reloads as it is typed in (below); its change event, fired when it loses focus,
  // would reload the list again, and a click on a row that moves the focus could land on a row
  // replaced between the press and the release, opening nothing.
  $("history-filters").addEventListener("change", (e) => { if (e.target.id !== "h-q") reload(); });
  $("history-filters").addEventListener("submit", (e) => { e.preventDefault(); reload(); });
  $("h-q").addEventListener("input", () => {
    clearTimeout(historyState.timer);
    historyState.timer = setTimeout(reload, 250);
  });
  $("h-prev").addEventListener("click", () => { if (historyState.page > 1) { historyState.page--; loadHistory(); } });
  $("h-next").addEventListener("click", () => { if (historyState.page < historyState.pages) { historyState.page++; loadHistory(); } });
  $("h-export-jsonl").addEventListener("click", () => exportHistory("jsonl"));
  $("h-export-csv").addEventListener("click", () => exportHistory("csv"));
  if (location.hash === "#history") {
    showView("history-view");
    reload();
  }
});
