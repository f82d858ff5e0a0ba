// garag's web page: verify a claim with every loaded config side by side, and browse compare runs.
// Every corpus or claim string is put into the page with textContent, never as markup.
"use strict";

const state = { configs: [], run: null, page: 1, pages: 1 };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

const $ = (id) => document.getElementById(id);

function apiKey() {
  return $("api-key").value || sessionStorage.getItem("garag-key") || "";
}

function keyHeaders(headers = {}) {
  const key = apiKey();
  if (key) headers["X-API-Key"] = key;
  return headers;
}

// every call of the page's scripts: the key sent, JSON back (null for 204), one Error line otherwise
async function request(path, init = {}) {
  const res = await fetch(path, { ...init, headers: keyHeaders({ Accept: "application/json", ...(init.headers || {}) }) });
  if (res.status === 204) return null;
  let data = null;
  try {
    data = await res.json();
  } catch (e) {
    data = { error: res.statusText };
  }
  if (!res.ok) throw new Error(`${res.status}: ${data.error || res.statusText}`);
  return data;
}

async function api(path, body) {
  if (body === undefined) return request(path);
  return request(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
}

function sid(page, line) {
  return `${page} (${line})`;
}

function labelBadge(label) {
  const cls = "badge " + String(label).replace(/[^A-Za-z]+/g, "-").toLowerCase();
  return el("span", { class: cls, text: label });
}

// -- status -------------------------------------------------------------------------------------

async function refreshStatus() {
  const node = $("status");
  clearTimeout(state.statusTimer);
  try {
    const r = await fetch("/v1/ready", { headers: keyHeaders() });
    if (r.status === 401) {
      node.textContent = apiKey() ? "wrong API key" : "API key needed";
      node.className = "status bad";
      return; // checked again when a key is entered
    }
    const data = await r.json();
    node.textContent = data.ready ? "ready" : data.error ? "failed: " + data.error : "loading models…";
    node.className = "status " + (data.ready ? "ok" : data.error ? "bad" : "wait");
    if (!data.ready && !data.error) state.statusTimer = setTimeout(refreshStatus, 2000);
  } catch (e) {
    node.textContent = "offline";
    node.className = "status bad";
  }
}

// -- verify -------------------------------------------------------------------------------------

// The boxes shown stay until the answer is in (a claim verified meanwhile uses them), keep what was
// ticked, and only the latest call's answer is shown.
async function loadConfigs() {
  const box = $("configs");
  const seq = (state.configsSeq = (state.configsSeq || 0) + 1);
  let items;
  try {
    const data = await api("/v1/configs");
    if (seq !== state.configsSeq) return;
    state.configs = data.configs;
    const ticked = new Map([...box.querySelectorAll("input.cfg")].map((x) => [x.value, x.checked]));
    items = data.configs.map((c) =>
      el("label", { title: `${c.mode} mode, ${c.verifier} verifier${c.llm_judge !== "never" ? ` + LLM judge (${c.llm_judge})` : ""}, ${c.retrievers.join(" + ")}` },
        el("input", { type: "checkbox", id: "cfg-" + c.name, value: c.name, checked: ticked.get(c.name) ?? true, class: "cfg" }),
        ` ${c.name} `, el("small", { text: `(${c.mode})` })));
  } catch (e) {
    if (seq !== state.configsSeq) return;
    items = [el("span", { class: "error", text: e.message })];
  }
  box.replaceChildren(...items);
}

async function onVerify(ev) {
  ev.preventDefault();
  const claim = $("claim").value.trim();
  const err = $("verify-error");
  err.hidden = true;
  if (!claim) return;
  const chosen = [...document.querySelectorAll("input.cfg:checked")].map((x) => x.value);
  const k = $("k").value ? Number($("k").value) : undefined;
  $("verify-btn").disabled = true;
  await verifyInto($("results"), chosen, claim, k);
  $("verify-btn").disabled = false;
}

// One result per config in ``box``, each put in place as soon as it arrives: a result is in the page
// before its graph is drawn (cytoscape fails on a container that is not), whatever the others do.
async function verifyInto(box, names, claim, k) {
  box.replaceChildren(...names.map((name) => el("article", { class: "result pending", "data-config": name },
    el("h2", { text: name }), el("p", { text: "verifying…" }))));
  await Promise.all(names.map(async (name, i) => {
    try {
      const r = await api("/v1/verify", { claim, config: name, k });
      box.children[i].replaceWith(renderResult(r));
    } catch (e) {
      box.children[i].replaceWith(el("article", { class: "result", "data-config": name },
        el("h2", { text: name }), el("p", { class: "error", text: e.message })));
    }
  }));
}

function renderResult(r) {
  const art = el("article", { class: "result", "data-config": r.config });
  const scores = Object.entries(r.scores).map(([lab, p]) =>
    el("div", { class: "score" }, el("span", { text: lab }),
      el("span", { class: "bar" }, el("span", { style: `width:${Math.round(p * 100)}%` })),
      el("span", { text: p.toFixed(3) })));
  art.append(
    el("h2", { text: r.config }),
    el("p", { class: "verdict" }, labelBadge(r.label),
      r.dataset_label !== r.label ? el("small", { text: ` (${r.dataset_label})` }) : null),
    el("div", { class: "scores" }, scores),
    el("p", { class: "explanation", text: r.explanation }),
    el("h3", { text: `Evidence read (${r.evidence.length})` }),
    el("ol", { class: "evidence" }, r.evidence.map((e) =>
      el("li", { class: e.cited ? "cited" : null, "data-sid": sid(e.page, e.line) },
        el("code", { text: sid(e.page, e.line) }), " ", el("span", { class: "text", text: e.text }), " ",
        el("small", { class: "retrievers", text: e.retrievers.length ? e.retrievers.join(", ") : "program step" }),
        e.cited ? el("small", { class: "cite", text: " cited" }) : null))),
  );
  if (r.subquestions && r.subquestions.length) {
    art.append(el("h3", { text: "Subquestions" }), el("ul", {}, r.subquestions.map((q) => el("li", { text: q }))));
  }
  if (r.steps) art.append(renderSteps(r.steps));
  if (r.graph) {
    const holder = el("div", { class: "graph", "data-config": r.config });
    const info = el("div", { class: "node-info", text: "Click a node to see its sentences." });
    art.append(el("h3", { text: `Fact graph (${r.graph.nodes.length} nodes, ${r.graph.edges.length} edges)` }),
      el("p", { class: "hint", text: "Node size: propagated score. Blue: evidence sentences; orange: entities (bold: the claim's)." }),
      holder, info);
    setTimeout(() => drawGraph(holder, info, r.graph), 0);
  }
  if (r.graal_paths && r.graal_paths.length) {
    art.append(el("h3", { text: "GRAAL paths" }), el("ul", { class: "paths" }, r.graal_paths.map((p) =>
      el("li", {}, el("code", { text: sid(p.page, p.line) }), " ", el("em", { text: p.reason }), ": ",
        p.entities.join(" — "),
        p.edges.length ? el("small", { text: " via " + p.edges.map((e) => e.join("–")).join(", ") }) : null))));
  }
  const t = Object.entries(r.timings).map(([k, v]) => `${k} ${(v * 1000).toFixed(0)} ms`).join(" · ");
  art.append(el("p", { class: "timings", text: t }));
  return art;
}

function renderSteps(prog) {
  const box = el("div", { class: "steps" }, el("h3", { text: `Reasoning program (${prog.source || "?"})` }));
  const list = el("ol", {});
  for (const s of prog.steps || []) {
    list.append(el("li", {}, el("code", { text: s.var || "" }), " ", el("strong", { text: s.kind }), " ",
      el("span", { text: s.text || "" }), s.label ? [" → ", labelBadge(s.label)] : null,
      s.answer ? el("small", { text: ` answer: ${s.answer}` }) : null));
  }
  box.append(list);
  if (prog.label) box.append(el("p", {}, "Combined: ", labelBadge(prog.label)));
  return box;
}

function drawGraph(holder, info, graph) {
  if (typeof cytoscape !== "function") {
    holder.textContent = "graph library not loaded";
    return;
  }
  const top = Math.max(1e-9, ...graph.nodes.map((n) => n.propagated));
  const elements = [
    ...graph.nodes.map((n) => ({
      // labels for the claim's entities, the facts and the better half of the rest; the others on click
      data: { id: n.id, kind: n.kind, size: 12 + 48 * Math.max(0, n.propagated) / top, claim: n.claim ? 1 : 0,
        label: n.kind === "fact" || n.claim || n.propagated >= 0.5 * top ? n.label : "" },
    })),
    ...graph.edges.map((e, i) => ({
      data: { id: "e" + i, source: e.source, target: e.target, kind: e.kind,
        label: e.relations.join(", ") },
    })),
  ];
  const cy = cytoscape({
    container: holder,
    elements,
    layout: { name: "cose", animate: false, randomize: false, nodeRepulsion: 8000 },
    style: [
      { selector: "node", style: { width: "data(size)", height: "data(size)", label: "data(label)",
        "font-size": 9, "text-wrap": "ellipsis", "text-max-width": 120 } },
      { selector: "node[kind = 'fact']", style: { "background-color": "#2b6cb0", shape: "round-rectangle" } },
      { selector: "node[kind = 'entity']", style: { "background-color": "#dd6b20" } },
      { selector: "node[claim = 1]", style: { "border-width": 3, "border-color": "#1a202c", "font-weight": "bold" } },
      { selector: "edge", style: { width: 1, "line-color": "#a0aec0", "curve-style": "bezier" } },
      { selector: "edge[kind = 'relation']", style: { width: 2, "line-color": "#4a5568", label: "data(label)",
        "font-size": 7 } },
      { selector: ":selected", style: { "border-width": 4, "border-color": "#e53e3e" } },
    ],
  });
  holder._cy = cy;
  cy.on("tap", "node", (evt) => showNode(info, graph, evt.target.id()));
}

function showNode(info, graph, id) {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const node = byId.get(id);
  const facts = node.kind === "fact" ? [node] : graph.edges
    .filter((e) => e.source === id || e.target === id)
    .map((e) => byId.get(e.source === id ? e.target : e.source))
    .filter((n) => n && n.kind === "fact");
  info.replaceChildren(
    el("strong", { text: node.label }), el("small", { text: ` ${node.kind}, propagated ${node.propagated.toFixed(3)}` }),
    el("ul", {}, facts.map((f) => el("li", {}, el("code", { text: sid(f.page, f.line) }), " ",
      el("span", { text: f.text || "" })))));
}

// -- runs ---------------------------------------------------------------------------------------

async function loadRuns() {
  const sel = $("run-select");
  try {
    const data = await api("/v1/runs");
    sel.replaceChildren(...data.runs.map((r) => el("option", { value: r.run_id,
      text: `${r.run_id} (${r.dataset}, ${r.n_claims} claims)` })));
    if (data.runs.length) await openRun(data.runs[0].run_id);
    else $("run-info").textContent = "no compare runs under the results directory";
  } catch (e) {
    $("run-info").textContent = e.message;
  }
}

function fmt(x) {
  return typeof x === "number" ? x.toFixed(3) : "–";
}

async function openRun(runId) {
  const run = await api(`/v1/runs/${encodeURIComponent(runId)}`);
  state.run = run;
  state.page = 1;
  $("run-info").textContent = `${run.systems.join(" vs ")} on ${run.n_claims} ${run.dataset} claims`;
  const head = el("tr", {}, el("th", { text: "system" }), ["accuracy", "macro-F1", "FEVER score", "HoVer score",
    "evidence F1"].map((h) => el("th", { text: h })));
  const rows = run.systems.map((s) => {
    const m = run.metrics[s] || {};
    return el("tr", {}, el("td", { text: s }), ["label_accuracy", "macro_f1", "fever_score", "hover_score",
      "evidence_f1"].map((k) => el("td", { text: fmt(m[k]) })));
  });
  const sig = (run.significance || []).map((p) => {
    const mc = (p.accuracy || {}).mcnemar || {};
    return el("li", { text: `${p.a} vs ${p.b}: accuracy ${fmt((p.accuracy || {}).a)} vs ${fmt((p.accuracy || {}).b)}, McNemar p ${fmt(mc.p_value)}` });
  });
  $("run-summary").replaceChildren(el("table", { class: "metrics" }, el("thead", {}, head), el("tbody", {}, rows)),
    el("ul", { class: "sig" }, sig));
  const fill = (id, values, label) => $(id).replaceChildren(el("option", { value: "", text: "any" }),
    ...values.map((v) => el("option", { value: v, text: label ? label(v) : v })));
  fill("f-label", run.labels);
  fill("f-system", run.systems);
  fill("f-hops", run.hops.map(String));
  fill("f-slice", run.slices.map((s) => s.slice));
  $("claim-detail").replaceChildren();
  await loadClaims();
}

async function loadClaims() {
  if (!state.run) return;
  // filters fire one request each; only the newest may render (an older reply can arrive last)
  const seq = (state.claimsSeq = (state.claimsSeq || 0) + 1);
  const params = new URLSearchParams({ page: state.page, page_size: 20 });
  const add = (key, id) => { if ($(id).value) params.set(key, $(id).value); };
  add("label", "f-label");
  add("system", "f-system");
  add("hops", "f-hops");
  add("slice", "f-slice");
  add("disagree", "f-disagree");
  add("q", "f-q");
  if ($("f-correct").value) {
    if (!$("f-system").value) {
      $("claims-count").textContent = "pick a system to filter on right or wrong";
      return;
    }
    params.set("correct", $("f-correct").value);
  }
  let data;
  try {
    data = await api(`/v1/runs/${encodeURIComponent(state.run.run_id)}/claims?${params}`);
  } catch (e) {
    if (seq === state.claimsSeq) $("claims-count").textContent = e.message;
    return;
  }
  if (seq !== state.claimsSeq) return;  // a newer filter's request is on its way
  state.pages = data.pages;
  $("claims-count").textContent = `${data.total} claims`;
  $("page-info").textContent = ` page ${data.page} of ${data.pages} `;
  const systems = state.run.systems;
  const hops = state.run.hops.length > 0;
  $("claims-table").tHead.replaceChildren(el("tr", {}, el("th", { text: "id" }), el("th", { text: "claim" }),
    el("th", { text: "gold" }), hops ? el("th", { text: "hops" }) : null, systems.map((s) => el("th", { text: s }))));
  $("claims-table").tBodies[0].replaceChildren(...data.claims.map((c) =>
    el("tr", { class: "claim-row", "data-id": c.id, onclick: () => openClaim(c.id) },
      el("td", { text: c.id }), el("td", { class: "claim-text", text: c.claim }), el("td", { text: c.label || "" }),
      hops ? el("td", { text: c.hops ?? "" }) : null,
      systems.map((s) => {
        const p = c.systems[s];
        if (!p) return el("td", { text: "–" });
        return el("td", { class: p.correct === true ? "right" : p.correct === false ? "wrong" : null },
          p.dataset_label, p.correct === null ? "" : p.correct ? " ✓" : " ✗");
      }))));
}

async function openClaim(id) {
  const d = await api(`/v1/runs/${encodeURIComponent(state.run.run_id)}/claims/${encodeURIComponent(id)}`);
  const gold = d.gold_evidence.map((g) => el("ul", {}, g.map((s) => el("li", {}, el("code", { text: sid(s.page, s.line) }), " ",
    el("span", { text: s.text ?? "(text not loaded)" })))));
  const goldIds = new Set(d.gold_evidence.flat().map((x) => sid(x.page, x.line)));
  const columns = el("div", { class: "columns" }, Object.entries(d.sentences).map(([s, sents]) => {
    const p = d.claim.systems[s];
    const cited = new Set((d.records[s].predicted_evidence || []).map((x) => sid(x[0], x[1])));
    return el("article", { class: "result", "data-system": s }, el("h2", { text: s }),
      el("p", {}, labelBadge(p.predicted_label), p.correct === null ? "" : p.correct ? " right" : " wrong"),
      el("p", { class: "explanation", text: p.explanation }),
      el("h3", { text: "Evidence read" }),
      el("ol", { class: "evidence" }, sents.map((x) => el("li", { class: cited.has(sid(x.page, x.line)) ? "cited" : null },
        el("code", { text: sid(x.page, x.line) }), " ", el("span", { text: x.text ?? "(text not loaded)" }),
        goldIds.has(sid(x.page, x.line)) ? el("small", { class: "gold", text: " gold" }) : null))));
  }));
  const live = el("div", { class: "columns live" });
  const button = el("button", { type: "button", id: "reverify", onclick: async () => {
    button.disabled = true;
    // (it rendered every result first and put them in the page together: a graph drawn before
    // then had a detached container, "Cannot read properties of undefined (reading 'w')")
    await verifyInto(live, state.configs.map((c) => c.name), d.claim.claim);
    button.disabled = false;
  } }, "Verify again with the loaded configs (draws their graphs)");
  const parts = [el("h2", {}, `Claim ${d.claim.id}: `, el("span", { class: "claim-text", text: d.claim.claim })),
    el("p", {}, "Gold: ", d.claim.label ? labelBadge(d.claim.label) : "–", d.claim.hops ? ` · ${d.claim.hops} hops` : ""),
    d.gold_evidence.length ? [el("h3", { text: "Gold evidence (any one set suffices)" }), gold] : [], columns, button, live];
  $("claim-detail").replaceChildren(...parts.flat(Infinity));
  $("claim-detail").scrollIntoView({ block: "start" });
}

// -- wiring -------------------------------------------------------------------------------------

function showView(id) {
  for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== id;
  for (const t of document.querySelectorAll("button.tab")) t.classList.toggle("active", t.dataset.view === id);
  if (id === "runs-view" && !state.runsLoaded) {
    state.runsLoaded = true;
    loadRuns();
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("api-key").value = sessionStorage.getItem("garag-key") || "";
  $("api-key").addEventListener("change", () => {
    // kept for this tab only; a key not yet tried (not the same one again when the box loses the
    // focus) is announced as "garag-key", on which every tab asks again what it shows
    if ($("api-key").value === sessionStorage.getItem("garag-key")) return;
    sessionStorage.setItem("garag-key", $("api-key").value);
    document.dispatchEvent(new Event("garag-key"));
  });
  document.addEventListener("garag-key", () => { refreshStatus(); loadConfigs(); });
  for (const t of document.querySelectorAll("button.tab")) t.addEventListener("click", () => showView(t.dataset.view));
  $("verify-form").addEventListener("submit", onVerify);
  $("run-select").addEventListener("change", () => openRun($("run-select").value));
  $("filters").addEventListener("change", () => { state.page = 1; loadClaims(); });
  $("filters").addEventListener("submit", (e) => { e.preventDefault(); state.page = 1; loadClaims(); });
  $("prev").addEventListener("click", () => { if (state.page > 1) { state.page--; loadClaims(); } });
  $("next").addEventListener("click", () => { if (state.page < state.pages) { state.page++; loadClaims(); } });
  if (location.hash === "#runs") showView("runs-view");
  refreshStatus();
  loadConfigs();
});
