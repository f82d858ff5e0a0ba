// garag's page, the Corpus tab: what each config answers from, pages added (a wiki-pages file, or one
// page written here) and removed, and the progress of the corpus update that applies them.
// Uses app.js's el, $, api, request and sid; every page text is put in with textContent.
"use strict";

const corpusState = { data: null, timer: null };

function corpusCall(method, path, body, type) {
  return request(path, { method, body, headers: { "Content-Type": type } });
}

function corpusError(message) {
  const node = $("corpus-error");
  node.textContent = message || "";
  node.hidden = !message;
}

async function loadCorpus() {
  let data;
  try {
    data = await api("/v1/corpus");
  } catch (e) {
    corpusError(e.message);
    return;
  }
  corpusState.data = data;
  $("corpus-table").tBodies[0].replaceChildren(...data.configs.map((c) =>
    el("tr", { "data-config": c.name }, el("td", { text: c.name }), el("td", { text: c.corpus }),
      el("td", { class: "pages", text: c.pages }), el("td", { class: "sentences", text: c.sentences }),
      el("td", { class: "version" }, el("code", { text: c.index_version })), el("td", { text: c.edits_applied }))));
  const select = $("corpus-config");
  const chosen = select.value;
  select.replaceChildren(...data.configs.map((c) => el("option", { value: c.name, text: c.name })));
  if (chosen) select.value = chosen;
  showShared();
  const edits = new Map(data.corpora.flatMap((c) => c.edits).map((e) => [e.update, e]));
  $("corpus-updates").replaceChildren(...data.updates.map((u) => {
    const e = edits.get(u.id);
    const what = e ? `${e.kind === "add" ? "add" : "remove"} ${e.pages} page${e.pages === 1 ? "" : "s"} (${e.page_ids.join(", ")}${e.pages > e.page_ids.length ? ", …" : ""})` : "";
    return el("li", { "data-id": u.id }, el("code", { text: u.id }), ` ${what}: `, el("strong", { text: u.status }),
      u.status === "running" || u.status === "queued" ? ` · ${u.phase}` : "", u.error ? el("span", { class: "error", text: ` ${u.error}` }) : null);
  }));
}

function showShared() {
  const data = corpusState.data;
  if (!data) return;
  const name = $("corpus-config").value;
  const mine = data.corpora.find((c) => c.configs.includes(name));
  const others = data.configs.map((c) => c.name).filter((n) => !mine || !mine.configs.includes(n));
  $("corpus-shared").textContent = mine
    ? ` edits apply to ${mine.configs.join(", ")}${others.length ? ` (not to ${others.join(", ")}: another corpus)` : ""}`
    : "";
}

function renderUpdate(u) {
  const result = Object.entries(u.result || {}).map(([n, r]) =>
    `${n}: index ${r.index_version}, ${r.pages} pages, ${r.sentences} sentences`).join("; ");
  return el("div", { class: `update ${u.status}`, "data-id": u.id, "data-status": u.status },
    el("strong", { text: `Update ${u.id}: ${u.status}` }),
    u.status === "queued" || u.status === "running" ? el("span", { class: "phase", text: ` · ${u.phase}` }) : null,
    el("span", { class: "bar" }, el("span", { style: `width:${Math.round(u.progress * 100)}%` })),
    u.error ? el("p", { class: "error", text: u.error }) : null,
    result ? el("p", { class: "update-result", text: result }) : null);
}

async function followUpdate(id) {
  clearTimeout(corpusState.timer);
  let u;
  try {
    u = await api(`/v1/corpus/updates/${encodeURIComponent(id)}`);
  } catch (e) {
    corpusError(e.message);
    return;
  }
  $("corpus-update").replaceChildren(renderUpdate(u));
  if (u.status === "queued" || u.status === "running") {
    corpusState.timer = setTimeout(() => followUpdate(id), 500);
  } else {
    $("corpus-page").replaceChildren(); // a page shown before may have changed
    loadCorpus();
  }
}

// One page from the form, in the wiki-pages format: sentences numbered from 0, the text their join.
function writtenPage() {
  const id = $("corpus-page-id").value;
  const lines = $("corpus-page-lines").value.split("\n").map((s) => s.trim()).filter((s) => s);
  if (!id || !lines.length) throw new Error("choose a file, or give a page id and its sentences");
  const tab = lines.findIndex((s) => s.includes("\t"));
  if (tab >= 0) throw new Error(`sentence ${tab + 1} holds a tab (the format separates links with tabs)`);
  return JSON.stringify({ id, text: lines.join(" "), lines: lines.map((s, i) => `${i}\t${s}`).join("\n") }) + "\n";
}

async function submitEdit(button, send) {
  corpusError("");
  button.disabled = true;
  try {
    const r = await send();
    await followUpdate(r.update.id);
    return r;
  } catch (e) {
    corpusError(e.message);
    return null;
  } finally {
    button.disabled = false;
  }
}

async function onAddPages(ev) {
  ev.preventDefault();
  const config = encodeURIComponent($("corpus-config").value);
  const r = await submitEdit($("corpus-add-btn"), () => {
    const file = $("corpus-file").files[0];
    const body = file || writtenPage();
    return corpusCall("POST", `/v1/corpus/pages?config=${config}`, body, "application/x-ndjson");
  });
  if (r) $("corpus-add").reset();
}

async function onRemovePages(ev) {
  ev.preventDefault();
  // one id a line, white space around it dropped: as garag reads a file of ids
  const ids = $("corpus-remove-ids").value.split("\n").map((s) => s.trim()).filter((s) => s);
  if (!ids.length) return corpusError("give the ids of the pages to remove, one a line");
  const body = JSON.stringify({ ids, config: $("corpus-config").value });
  const r = await submitEdit($("corpus-remove-btn"), () => corpusCall("DELETE", "/v1/corpus/pages", body, "application/json"));
  if (r) $("corpus-remove").reset();
}

async function onLookup(ev) {
  ev.preventDefault();
  corpusError("");
  const id = $("corpus-lookup-id").value;
  if (!id) return;
  const config = encodeURIComponent($("corpus-config").value);
  try {
    const p = await api(`/v1/corpus/pages/${encodeURIComponent(id)}?config=${config}`);
    $("corpus-page").replaceChildren(...p.sentences.map((s) =>
      el("li", {}, el("code", { text: sid(p.page, s.line) }), " ", el("span", { class: "text", text: s.text }))));
  } catch (e) {
    $("corpus-page").replaceChildren();
    corpusError(e.message);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("tab-corpus").addEventListener("click", loadCorpus);
  $("corpus-config").addEventListener("change", showShared);
  $("corpus-add").addEventListener("submit", onAddPages);
  $("corpus-remove").addEventListener("submit", onRemovePages);
  $("corpus-lookup").addEventListener("submit", onLookup);
  if (location.hash === "#corpus") {
    showView("corpus-view");
    loadCorpus();
  }
});
