// The Passage tab: a text's check-worthy claims, each marked in the text by its verdict; clicking a
// mark opens the claim's evidence and graph.  Uses app.js's el, $, api, labelBadge and renderResult.
// The passage is put into the page with textContent only, as every other string.
"use strict";

const passageState = { groups: [] };

async function loadPassageConfigs() {
  const sel = $("passage-config");
  const chosen = sel.value;
  try {
    const data = await api("/v1/configs");
    sel.replaceChildren(...data.configs.map((c) => el("option", { value: c.name, text: `${c.name} (${c.mode})` })));
    if (chosen && data.configs.some((c) => c.name === chosen)) sel.value = chosen;
  } catch (e) {
    sel.replaceChildren();
  }
}

function verdictClass(claims) {
  const labels = claims.map((c) => (c.result ? c.result.label : null));
  if (labels.includes(null)) return "unverified";
  if (labels.includes("REFUTES")) return "refutes";
  if (labels.every((l) => l === "SUPPORTS")) return "supports";
  return "not-enough-info";
}

async function onPassage(ev) {
  ev.preventDefault();
  const passage = $("passage").value;
  const err = $("passage-error");
  err.hidden = true;
  if (!passage.trim()) return;
  $("passage-btn").disabled = true;
  $("passage-out").replaceChildren(el("p", { class: "hint", text: "splitting and verifying…" }));
  try {
    const r = await api("/v1/verify/passage", { passage, config: $("passage-config").value || undefined,
      splitter: $("passage-splitter").value });
    renderPassage(r);
  } catch (e) {
    $("passage-out").replaceChildren();
    err.textContent = e.message;
    err.hidden = false;
  }
  $("passage-btn").disabled = false;
}

// Claims that share a sentence (the LLM's restatements of it) share one mark.
function groupClaims(r) {
  const bySpan = new Map();
  for (const c of r.claims) {
    const key = `${c.start}:${c.end}`;
    if (!bySpan.has(key)) bySpan.set(key, { start: c.start, end: c.end, claims: [] });
    bySpan.get(key).claims.push(c);
  }
  return [...bySpan.values()].sort((a, b) => a.start - b.start);
}

function renderPassage(r) {
  const groups = groupClaims(r);
  passageState.groups = groups;
  const spans = [...groups.map((g, i) => ({ ...g, group: i })),
    ...r.skipped.map((s) => ({ start: s.start, end: s.end, skipped: s }))].sort((a, b) => a.start - b.start);
  const text = el("div", { class: "passage-text", id: "passage-text" });
  let at = 0;
  for (const s of spans) {
    if (s.start < at) continue; // spans never overlap; a defensive skip rather than a garbled text
    if (s.start > at) text.append(r.passage.slice(at, s.start));
    const part = r.passage.slice(s.start, s.end);
    if (s.skipped) {
      text.append(el("span", { class: "skipped", title: `not checked: ${s.skipped.reason}` }, part));
    } else {
      const cls = verdictClass(s.claims);
      const labels = s.claims.map((c) => (c.result ? c.result.label : "not verified")).join(", ");
      text.append(el("mark", { class: `claim ${cls}`, "data-group": s.group, tabindex: 0, role: "button",
        title: `${labels}: ${s.claims[0].reason}`, onclick: () => openGroup(s.group),
        onkeydown: (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); openGroup(s.group); } } },
      part));
    }
    at = s.end;
  }
  if (at < r.passage.length) text.append(r.passage.slice(at));
  const counts = Object.entries(r.counts).filter(([, n]) => n > 0).map(([l, n]) => `${n} ${l}`).join(", ");
  const summary = el("p", { class: "passage-summary" },
    `${r.claims.length} check-worthy claim${r.claims.length === 1 ? "" : "s"}`, counts ? ` (${counts})` : "",
    ` · ${r.skipped.length} sentence${r.skipped.length === 1 ? "" : "s"} not checked · ${r.config}, `,
    el("small", { text: `claims by ${r.splitter === "llm" ? "the LLM" : "rules"}, corpus ${r.index_version || "?"}, ${r.timings.total.toFixed(2)} s` }));
  const list = el("ol", { class: "passage-claims" }, groups.map((g, i) => g.claims.map((c) =>
    el("li", { "data-group": i, onclick: () => openGroup(i) },
      c.result ? labelBadge(c.result.label) : el("span", { class: "badge", text: "not verified" }), " ",
      el("span", { class: "claim-text", text: c.text }), c.source === "llm" ? el("small", { text: " (LLM)" }) : null))));
  const skipped = r.skipped.length ? el("details", { class: "passage-skipped" },
    el("summary", { text: `Not checked (${r.skipped.length})` }),
    el("ul", {}, r.skipped.map((s) => el("li", {}, el("span", { text: s.text }), " ", el("small", { text: `— ${s.reason}` }))))) : null;
  $("passage-out").replaceChildren(summary, text, el("h3", { text: "Claims" }), list, skipped,
    el("div", { id: "passage-detail" }));
}

function openGroup(i) {
  const g = passageState.groups[i];
  for (const m of document.querySelectorAll("#passage-text mark.claim")) {
    m.classList.toggle("selected", Number(m.dataset.group) === i);
  }
  const detail = $("passage-detail");
  detail.replaceChildren(...g.claims.map((c) => el("section", { class: "passage-claim" },
    el("h3", {}, "Claim: ", el("span", { class: "claim-text", text: c.text })),
    el("p", { class: "hint", text: c.source === "llm" ? `restated by the LLM from the sentence; ${c.reason}` : c.reason }),
    c.result ? el("div", { class: "columns" }) : el("p", { class: "error", text: c.unverified || "not verified" }))));
  // results go in after their holders are in the page: renderResult draws the graph on the next tick
  g.claims.forEach((c, k) => {
    if (c.result) detail.children[k].querySelector(".columns").append(renderResult(c.result));
  });
  detail.scrollIntoView({ block: "nearest" });
}

document.addEventListener("DOMContentLoaded", () => {
  $("passage-form").addEventListener("submit", onPassage);
  const count = () => { $("passage-count").textContent = `${$("passage").value.length} / 5000 characters`; };
  $("passage").addEventListener("input", count);
  count();
  $("tab-passage").addEventListener("click", loadPassageConfigs);
  document.addEventListener("garag-key", loadPassageConfigs);
  if (location.hash === "#passage") {
    showView("passage-view");
    loadPassageConfigs();
  }
});
