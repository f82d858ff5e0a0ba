// garag's web page, the Jobs tab: upload a claims file, follow the job's progress, filter its results
// and download them.  Uses el, $, api, request, keyHeaders and labelBadge of app.js (loaded first).
// Progress comes from the job's server-sent events, read with fetch (EventSource cannot send the API key).
"use strict";

const jobs = { current: null, follow: null, page: 1, pages: 1, configsLoaded: false };

function showJobError(message) {
  const node = $("job-error");
  node.textContent = message || "";
  node.hidden = !message;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.round(seconds);
  return s >= 3600 ? `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min` : s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s} s`;
}

function progressText(job) {
  const parts = [`${job.done} of ${job.total} claims`];
  if (job.claims_per_second) parts.push(`${job.claims_per_second.toFixed(1)} claims/s`);
  if (job.eta_seconds !== null && job.eta_seconds !== undefined && job.state !== "done") parts.push(`about ${duration(job.eta_seconds)} left`);
  if (job.starts > 1) parts.push(`resumed ${job.starts - 1}×`);
  return parts.join(" · ");
}

// -- the list ------------------------------------------------------------------------------------

async function loadJobConfigs() {
  const select = $("job-config");
  try {
    const data = await api("/v1/configs");
    select.replaceChildren(...data.configs.map((c) => el("option", { value: c.name, text: `${c.name} (${c.mode})` })));
    jobs.configsLoaded = true;
  } catch (e) {
    showJobError(e.message);
  }
}

async function loadJobs() {
  try {
    const data = await request("/v1/jobs");
    const rows = data.jobs.map((j) => el("tr", { class: "job-row" + (jobs.current === j.id ? " selected" : ""), "data-job": j.id, onclick: () => openJob(j.id) },
      el("td", {}, el("span", { text: j.name }), el("br"), el("small", { text: j.id })),
      el("td", { text: j.config }),
      el("td", {}, el("span", { class: `job-state ${j.state}`, text: j.state })),
      el("td", {}, el("progress", { max: Math.max(j.total, 1), value: j.done }), " ", el("small", { class: "job-count", text: `${j.done}/${j.total}` })),
      el("td", { text: new Date(j.created).toLocaleString() })));
    $("jobs-table").querySelector("tbody").replaceChildren(...rows);
    $("jobs-empty").hidden = data.jobs.length > 0;
  } catch (e) {
    showJobError(e.message);
  }
}

async function onSubmitJob(ev) {
  ev.preventDefault();
  showJobError("");
  const file = $("job-file").files[0];
  if (!file) return;
  const form = new FormData();
  form.append("file", file, file.name);
  form.append("config", $("job-config").value || "baseline");
  if ($("job-k").value) form.append("k", $("job-k").value);
  $("job-submit").disabled = true;
  try {
    const job = await request("/v1/jobs", { method: "POST", body: form });
    $("job-form").reset();
    await loadJobs();
    await openJob(job.id);
  } catch (e) {
    showJobError(e.message);
  } finally {
    $("job-submit").disabled = false;
  }
}

// -- one job -------------------------------------------------------------------------------------

function metricsTable(m) {
  const rows = [["claims scored", m.n], ["label accuracy", m.label_accuracy], ["FEVER score", m.fever_score], ["macro-F1", m.macro_f1],
    ["evidence precision", m.evidence_precision], ["evidence recall", m.evidence_recall], ["evidence F1", m.evidence_f1]];
  return el("table", { class: "metrics job-metrics" }, el("tbody", {}, rows.map(([k, v]) =>
    el("tr", {}, el("th", { text: k }), el("td", { text: typeof v === "number" && !Number.isInteger(v) ? v.toFixed(4) : String(v) })))));
}

function renderJob(job) {
  const box = $("job-detail");
  let bar = $("job-progress");
  if (!bar || box.dataset.job !== job.id) {
    box.dataset.job = job.id;
    const downloads = el("p", { class: "downloads" }, "Download: ",
      [["jsonl", "garag JSONL"], ["fever", "FEVER submission"], ["csv", "CSV"]].map(([fmt, text]) =>
        el("button", { type: "button", class: "download", "data-format": fmt, onclick: () => download(job.id, fmt) }, text)));
    box.replaceChildren(
      el("h2", {}, el("span", { class: "job-name", text: job.name }), " ", el("small", { text: `${job.id} · ${job.config}${job.k ? ` · k=${job.k}` : ""} · ${job.format}` })),
      el("div", { class: "row" }, el("span", { id: "job-state", class: "job-state" }),
        el("progress", { id: "job-progress", max: Math.max(job.total, 1), value: 0 }),
        el("span", { id: "job-progress-text" }),
        el("button", { type: "button", id: "job-cancel", onclick: () => cancelJob(job.id) }, "Cancel"),
        el("button", { type: "button", id: "job-resume", onclick: () => resumeJob(job.id) }, "Resume"),
        el("button", { type: "button", id: "job-delete", onclick: () => deleteJob(job.id) }, "Delete")),
      el("p", { id: "job-job-error", class: "error", hidden: true }),
      el("div", { id: "job-metrics" }),
      downloads,
      el("form", { id: "job-filters", class: "row" },
        el("label", {}, "Verdict ", el("select", { id: "jf-label" }, el("option", { value: "", text: "any" }),
          ["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"].map((l) => el("option", { value: l, text: l })))),
        el("label", {}, "It is ", el("select", { id: "jf-correct" }, el("option", { value: "", text: "right or wrong" }),
          el("option", { value: "true", text: "right" }), el("option", { value: "false", text: "wrong" }))),
        el("label", {}, "Text ", el("input", { id: "jf-q", type: "search", maxlength: 200 }))),
      el("p", { id: "job-results-count" }),
      el("table", { id: "job-results" }, el("thead", {}, el("tr", {}, ["#", "id", "claim", "gold", "verdict", "evidence"].map((h) => el("th", { text: h })))), el("tbody")),
      el("div", { class: "row pager" }, el("button", { type: "button", id: "job-prev", onclick: () => { if (jobs.page > 1) { jobs.page--; loadResults(); } } }, "previous"),
        el("span", { id: "job-page-info" }), el("button", { type: "button", id: "job-next", onclick: () => { if (jobs.page < jobs.pages) { jobs.page++; loadResults(); } } }, "next")));
    $("job-filters").addEventListener("change", () => { jobs.page = 1; loadResults(); });
    $("job-filters").addEventListener("submit", (e) => { e.preventDefault(); jobs.page = 1; loadResults(); });
    bar = $("job-progress");
  }
  bar.max = Math.max(job.total, 1);
  bar.value = job.done;
  bar.setAttribute("value", String(job.done)); // an attribute too, so that it can be watched
  $("job-state").textContent = job.state;
  $("job-state").className = `job-state ${job.state}`;
  $("job-progress-text").textContent = progressText(job);
  $("job-cancel").hidden = !["queued", "running"].includes(job.state);
  $("job-delete").hidden = ["queued", "running"].includes(job.state);
  $("job-resume").hidden = !["cancelled", "failed"].includes(job.state);
  const err = $("job-job-error");
  err.textContent = job.error || "";
  err.hidden = !job.error;
  $("job-metrics").replaceChildren(...(job.metrics ? [el("h3", { text: "Metrics (as garag evaluate computes them)" }), metricsTable(job.metrics)] : []));
  const row = document.querySelector(`tr.job-row[data-job="${job.id}"]`);
  if (row) {
    row.querySelector(".job-state").textContent = job.state;
    row.querySelector(".job-state").className = `job-state ${job.state}`;
    row.querySelector("progress").value = job.done;
    row.querySelector("small.job-count").textContent = `${job.done}/${job.total}`;
  }
}

async function openJob(id) {
  if (jobs.follow) jobs.follow.abort();
  jobs.current = id;
  jobs.page = 1;
  for (const r of document.querySelectorAll("tr.job-row")) r.classList.toggle("selected", r.dataset.job === id);
  try {
    const job = await request(`/v1/jobs/${encodeURIComponent(id)}`);
    renderJob(job);
    await loadResults();
    if (["queued", "running"].includes(job.state)) followJob(id);
  } catch (e) {
    showJobError(e.message);
  }
}

// Reads /v1/jobs/{id}/events: a "progress" event whenever the job moves, "end" when it has finished.
async function followJob(id) {
  const ctl = new AbortController();
  jobs.follow = ctl;
  let lastDone = -1;
  try {
    const res = await fetch(`/v1/jobs/${encodeURIComponent(id)}/events`, { headers: keyHeaders({ Accept: "text/event-stream" }), signal: ctl.signal });
    if (!res.ok) throw new Error(`${res.status}: progress stream`);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        let event = "message", data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
        }
        if (!data || jobs.current !== id) continue;
        const job = JSON.parse(data);
        if (job.deleted) return;
        renderJob(job);
        // the table follows the results as they come, a few at a time on its first page
        if (event === "end" || (jobs.page === 1 && job.done !== lastDone && lastDone < jobs.pageSize)) loadResults();
        lastDone = job.done;
        if (event === "end") { loadJobs(); return; }
      }
    }
    // the server closes a stream after a while (and when it stops): follow on with a new one
    if (jobs.current === id && !ctl.signal.aborted) setTimeout(() => { if (jobs.follow === ctl) followJob(id); }, 1000);
  } catch (e) {
    if (e.name !== "AbortError") showJobError(e.message);
  } finally {
    if (jobs.follow === ctl && ctl.signal.aborted) jobs.follow = null;
  }
}

async function loadResults() {
  const id = jobs.current;
  if (!id) return;
  const ask = (jobs.asked = (jobs.asked || 0) + 1); // only the latest request fills the table
  const params = new URLSearchParams({ page: jobs.page, page_size: 50 });
  for (const [key, node] of [["label", "jf-label"], ["correct", "jf-correct"], ["q", "jf-q"]]) {
    if ($(node) && $(node).value) params.set(key, $(node).value);
  }
  try {
    const data = await request(`/v1/jobs/${encodeURIComponent(id)}/results?${params}`);
    if (jobs.current !== id || ask !== jobs.asked) return;
    jobs.pages = data.pages;
    jobs.pageSize = data.page_size;
    $("job-results-count").textContent = `${data.total} results`;
    $("job-page-info").textContent = ` page ${data.page} of ${data.pages} `;
    $("job-results").querySelector("tbody").replaceChildren(...data.results.map((r) => el("tr", {},
      el("td", { text: r.index }), el("td", { text: r.id }), el("td", { class: "claim-text", text: r.claim }),
      el("td", {}, r.gold_label ? labelBadge(r.gold_label) : "–"),
      el("td", { class: r.correct === null ? null : r.correct ? "right" : "wrong" }, labelBadge(r.predicted_label)),
      el("td", {}, r.predicted_evidence.map((e, i) => [i ? ", " : "", el("code", { text: sid(e[0], e[1]) })])))));
  } catch (e) {
    showJobError(e.message);
  }
}

async function cancelJob(id) {
  try {
    renderJob(await request(`/v1/jobs/${encodeURIComponent(id)}/cancel`, { method: "POST" }));
    loadJobs();
  } catch (e) {
    showJobError(e.message);
  }
}

async function resumeJob(id) {
  try {
    renderJob(await request(`/v1/jobs/${encodeURIComponent(id)}/resume`, { method: "POST" }));
    loadJobs();
    followJob(id);
  } catch (e) {
    showJobError(e.message);
  }
}

async function deleteJob(id) {
  try {
    await request(`/v1/jobs/${encodeURIComponent(id)}`, { method: "DELETE" });
    jobs.current = null;
    $("job-detail").replaceChildren();
    delete $("job-detail").dataset.job;
    loadJobs();
  } catch (e) {
    showJobError(e.message);
  }
}

// A download through fetch, so that the API key goes with it; saved under the server's file name.
async function download(id, fmt) {
  try {
    const res = await fetch(`/v1/jobs/${encodeURIComponent(id)}/results?format=${fmt}`, { headers: keyHeaders() });
    if (!res.ok) throw new Error(`${res.status}: download`);
    const name = /filename="([^"]+)"/.exec(res.headers.get("Content-Disposition") || "")?.[1] || `garag-job-${id}.${fmt}`;
    const url = URL.createObjectURL(await res.blob());
    const a = el("a", { href: url, download: name, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  } catch (e) {
    showJobError(e.message);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("job-form").addEventListener("submit", onSubmitJob);
  $("tab-jobs").addEventListener("click", () => {
    if (!jobs.configsLoaded) loadJobConfigs();
    loadJobs();
  });
  document.addEventListener("garag-key", () => { jobs.configsLoaded = false; });
  if (location.hash === "#jobs") $("tab-jobs").click();
});
