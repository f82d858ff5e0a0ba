"""The Jobs tab in a real chromium (Playwright) against a real uvicorn serving the real pipelines: a
claims file uploaded, the progress bar moving as the job runs, the result table filtered, the
metrics shown, and the three downloads saved."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from .conftest import XSS_CLAIM, serving
from .test_browser import browser, sync_api  # noqa: F401 - the browser fixture
from .test_jobs import many_claims

pytest.importorskip("python_multipart", reason="python-multipart (the serve extra) is not installed")

N = 2000

WATCH = """() => {
  window.__seen = [];
  new MutationObserver((records) => {
    for (const r of records)
      if (r.target.id === "job-progress") window.__seen.push(Number(r.target.getAttribute("value")));
  }).observe(document.body, { subtree: true, attributes: true, attributeFilter: ["value"] });
}"""


@pytest.fixture(scope="module")
def jobs_server(service, tmp_path_factory):
    from app.serve.app import create_app

    svc = copy.copy(service)
    svc.settings = dataclasses.replace(service.settings, state_dir=tmp_path_factory.mktemp("jobs-page"))
    app = create_app(svc)
    with serving(svc, app) as srv:
        yield srv
    app.state.jobs.stop()


def test_a_job_from_upload_to_download(browser, jobs_server, world, tmp_path):  # noqa: F811
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: m.type == "error" and errors.append(m.text))
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(jobs_server.url + "/#jobs")
    sync_api.expect(pg.locator("#status")).to_have_text("ready", timeout=30_000)
    sync_api.expect(pg.locator("#jobs-view")).to_be_visible()
    sync_api.expect(pg.locator("#job-config option")).to_have_count(3)
    sync_api.expect(pg.locator("#jobs-empty")).to_be_visible()
    path = tmp_path / "claims.jsonl"
    path.write_bytes(many_claims(world, N))
    pg.set_input_files("#job-file", str(path))
    pg.select_option("#job-config", "baseline")
    pg.evaluate(WATCH)
    pg.click("#job-submit")
    sync_api.expect(pg.locator("#job-state")).to_have_text("done", timeout=120_000)
    bar = pg.locator("#job-progress")
    assert bar.get_attribute("value") == str(N) and bar.get_attribute("max") == str(N)
    seen = pg.evaluate("() => window.__seen")
    assert seen == sorted(seen) and seen[-1] == N
    assert any(0 < v < N for v in seen), f"the bar jumped: {seen}"  # it moved while the job ran
    assert pg.locator("#job-progress-text").inner_text().startswith(f"{N} of {N} claims")
    job_id = pg.locator("#job-detail").get_attribute("data-job")
    row = pg.locator(f"tr.job-row[data-job='{job_id}']")
    sync_api.expect(row.locator(".job-state")).to_have_text("done")
    # the metrics, the table and its filters
    metrics = pg.locator("table.job-metrics")
    sync_api.expect(metrics).to_contain_text("FEVER score")
    sync_api.expect(pg.locator("#job-results-count")).to_have_text(f"{N} results")
    rows = pg.locator("#job-results tbody tr")
    sync_api.expect(rows).to_have_count(50)
    results = [json.loads(x) for x in many_results(jobs_server, job_id)]
    supports = sum(r["predicted_label"] == "SUPPORTS" for r in results)
    pg.select_option("#jf-label", "SUPPORTS")
    sync_api.expect(pg.locator("#job-results-count")).to_have_text(f"{supports} results")
    pg.select_option("#jf-label", "")
    # (each filter's count is awaited before the next: two filters may give the same count)
    sync_api.expect(pg.locator("#job-results-count")).to_have_text(f"{N} results")
    wrong = sum(r["dataset_label"] != r["label"] for r in results)
    pg.select_option("#jf-correct", "false")
    sync_api.expect(pg.locator("#job-results-count")).to_have_text(f"{wrong} results")
    assert all(rows.nth(i).locator("td.wrong").count() == 1 for i in range(min(rows.count(), 5)))
    pg.select_option("#jf-correct", "")
    sync_api.expect(pg.locator("#job-results-count")).to_have_text(f"{N} results")
    pg.fill("#jf-q", "<script>")
    pg.press("#jf-q", "Enter")
    markup = N // 7
    sync_api.expect(pg.locator("#job-results-count")).to_have_text(f"{markup} results")
    sync_api.expect(rows.first.locator("td.claim-text")).to_have_text(XSS_CLAIM)  # as text, never markup
    assert pg.evaluate("() => window.__xss") is None
    # the downloads (through fetch, so that an API key would go with them)
    for fmt, name in (("fever", f"garag-job-{job_id}.fever.jsonl"), ("jsonl", f"garag-job-{job_id}.jsonl"),
                      ("csv", f"garag-job-{job_id}.csv")):  # fmt: skip
        with pg.expect_download() as got:
            pg.click(f"button.download[data-format={fmt}]")
        assert got.value.suggested_filename == name
        text = open(got.value.path(), encoding="utf-8").read()
        assert len(text.splitlines()) == N + (fmt == "csv")
        if fmt == "fever":
            assert [json.loads(x)["id"] for x in text.splitlines()] == [r["id"] for r in results]
    assert errors == []
    ctx.close()


def many_results(server, job_id: str) -> list[str]:
    import httpx

    return httpx.get(f"{server.url}/v1/jobs/{job_id}/results?format=jsonl", timeout=60).text.splitlines()
