"""The web page in a real browser: Playwright driving Debian's chromium against a real uvicorn on
127.0.0.1 serving the real pipelines (tests/serve/conftest.py).

Playwright's own browser download does not work offline; the page is driven through the system
chromium (``apt-get install chromium``; ``GARAG_CHROMIUM`` names another binary).  Where chromium
is missing these tests skip, unless ``GARAG_REQUIRE_BROWSER=1`` (set by .ci/run) makes that a failure.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from .conftest import API_KEY, XSS_CLAIM

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def chromium_path() -> str | None:
    return os.environ.get("GARAG_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser():
    exe = chromium_path()
    if exe is None:
        if os.environ.get("GARAG_REQUIRE_BROWSER") == "1":
            pytest.fail(
                "GARAG_REQUIRE_BROWSER=1 but no chromium (apt-get install chromium, or set GARAG_CHROMIUM)"
            )
        pytest.skip("no chromium on PATH (apt-get install chromium); GARAG_REQUIRE_BROWSER=1 makes this fail")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    """A fresh page on the served app, with every console error and page error recorded."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.errors = []  # type: ignore[attr-defined]
    pg.on("console", lambda m: m.type == "error" and pg.errors.append(m.text))  # type: ignore[attr-defined]
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))  # type: ignore[attr-defined]
    pg.goto(server.url + "/")
    sync_api.expect(pg.locator("#status")).to_have_text("ready", timeout=30_000)
    yield pg
    ctx.close()


def verify(pg, claim: str) -> None:
    pg.fill("#claim", claim)
    pg.click("#verify-btn")
    sync_api.expect(pg.locator("#verify-btn")).to_be_enabled(timeout=60_000)


def test_page_loads_without_console_errors(page):
    sync_api.expect(page.locator("input.cfg")).to_have_count(3)
    page.click("#tab-runs")
    sync_api.expect(page.locator("#claims-table tbody tr")).to_have_count(7, timeout=30_000)
    page.click("#tab-verify")
    assert page.errors == []


def test_a_claim_gets_both_verdicts_and_a_graph_with_nodes(page):
    verify(page, "The Beatles were formed in Liverpool.")
    for name in ("baseline", "graph"):
        art = page.locator(f"article.result[data-config={name}]")
        sync_api.expect(art.locator(".verdict .badge")).to_have_count(1)
        assert art.locator(".verdict .badge").inner_text() in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
        assert art.locator("ol.evidence li").count() == 3
        assert art.locator("ol.evidence li.cited").count() >= 1  # the cited sentences are highlighted
    graph = page.locator(".graph[data-config=graph]")
    sync_api.expect(graph.locator("canvas").first).to_be_attached(timeout=10_000)
    counts = page.evaluate(
        "() => { const cy = document.querySelector('.graph[data-config=graph]')._cy;"
        " return [cy.nodes().length, cy.nodes('[kind = \"fact\"]').length, cy.edges().length]; }"
    )
    assert counts[0] > counts[1] > 0 and counts[2] > 0
    # node size follows the propagated score: the biggest node is the one with the top score
    sizes = page.evaluate(
        "() => document.querySelector('.graph[data-config=graph]')._cy.nodes().map(n => n.width())"
    )
    assert max(sizes) > min(sizes)
    # clicking an entity node lists its sentences
    page.evaluate(
        "() => { const cy = document.querySelector('.graph[data-config=graph]')._cy;"
        " cy.nodes('[kind = \"entity\"]').filter(n => n.degree() > 0)[0].emit('tap'); }"
    )
    info = page.locator("article.result[data-config=graph] .node-info")
    sync_api.expect(info.locator("li").first).to_be_visible()
    assert info.locator("li code").first.inner_text().endswith(")")
    assert page.locator("article.result[data-config=graph] ul.paths li").count() > 0  # GRAAL paths listed
    programs = page.locator("article.result[data-config=programs] .steps li")
    assert programs.count() >= 1  # the reasoning steps of the programs config
    assert page.errors == []


def test_the_run_browser_filters_claims_and_opens_one(page, world):
    page.click("#tab-runs")
    rows = page.locator("#claims-table tbody tr")
    sync_api.expect(rows).to_have_count(7, timeout=30_000)
    preds = {}
    for system in ("baseline", "graph"):
        path = world.results / world.run_id / "predictions" / f"{system}.jsonl"
        preds[system] = [json.loads(x) for x in path.read_text().splitlines()]
    supports = sum(r["label"] == "SUPPORTS" for r in preds["baseline"])
    page.select_option("#f-label", "SUPPORTS")
    sync_api.expect(rows).to_have_count(supports)
    page.select_option("#f-label", "")
    page.select_option("#f-system", "graph")
    page.select_option("#f-correct", "false")
    wrong = sum(r["label"] != r["dataset_label"] for r in preds["graph"])
    sync_api.expect(rows).to_have_count(wrong)
    sync_api.expect(page.locator("#claims-count")).to_have_text(f"{wrong} claims")
    page.select_option("#f-correct", "")
    page.select_option("#f-system", "")
    page.select_option("#f-slice", "evidence on several pages")
    sync_api.expect(rows).to_have_count(1)
    rows.first.click()
    detail = page.locator("#claim-detail")
    sync_api.expect(detail.locator("article.result")).to_have_count(2)
    assert "The Beatles were formed in England." in detail.locator("h2").first.inner_text()
    assert detail.locator("article.result[data-system=graph] ol.evidence li").count() == 3
    gold = detail.locator("h3", has_text="Gold evidence").locator("xpath=following-sibling::ul[1]/li")
    sync_api.expect(gold).to_have_count(2)
    assert "Liverpool" in gold.nth(1).inner_text() and "[object" not in detail.inner_text()
    read = detail.locator("article.result[data-system=baseline] ol.evidence li")
    marked = [read.nth(i).locator("small.gold").count() == 1 for i in range(read.count())]
    codes = [read.nth(i).locator("code").inner_text() for i in range(read.count())]
    assert marked == [c in ("The_Beatles (0)", "Liverpool (0)") for c in codes]
    page.click("#reverify")
    sync_api.expect(detail.locator(".live .graph canvas").first).to_be_attached(timeout=60_000)
    assert page.errors == []


def test_markup_in_claims_and_corpus_renders_as_text(page):
    verify(page, XSS_CLAIM)
    graph = page.locator("article.result[data-config=graph]")
    sync_api.expect(graph.locator(".verdict .badge")).to_have_count(1)
    markup = graph.locator("ol.evidence li .text", has_text="<script>window.__xss = 3</script>")
    sync_api.expect(markup.first).to_be_visible()  # the corpus line is shown, literally
    page.click("#tab-runs")
    sync_api.expect(page.locator("#claims-table tbody tr")).to_have_count(7, timeout=30_000)
    cell = page.locator("#claims-table td.claim-text", has_text="<script>window.__xss = 1</script>")
    sync_api.expect(cell).to_have_count(1)
    cell.click()  # the row opens the claim
    sync_api.expect(page.locator("#claim-detail h2 .claim-text")).to_have_text(XSS_CLAIM)
    assert page.evaluate("() => window.__xss") is None  # no script ran, no onerror fired
    assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
    assert page.errors == []


def test_with_an_api_key_the_page_works_once_the_key_is_typed(browser, keyed_server):
    """Keyed mode: before a key the status says so and there are no configs; the key typed once is
    kept for the tab, sent with every call (/v1/ready too), and the configs load without a reload.
    They are asked once per new key, and a claim verified while they are asked again is verified
    with the boxes shown (the CI failure of c514c8f: the key box's change on blur emptied them)."""
    ctx = browser.new_context()
    pg = ctx.new_page()
    asked = []
    pg.on("request", lambda r: asked.append(r.url) if r.url.endswith("/v1/configs") else None)
    pg.goto(keyed_server.url + "/")
    sync_api.expect(pg.locator("#status")).to_have_text("API key needed", timeout=30_000)
    sync_api.expect(pg.locator("input.cfg")).to_have_count(0)
    pg.fill("#api-key", "wrong")
    pg.dispatch_event("#api-key", "change")
    sync_api.expect(pg.locator("#status")).to_have_text("wrong API key", timeout=30_000)
    pg.fill("#api-key", API_KEY)
    pg.dispatch_event("#api-key", "change")
    sync_api.expect(pg.locator("#status")).to_have_text("ready", timeout=30_000)
    sync_api.expect(pg.locator("input.cfg")).to_have_count(1)
    assert pg.evaluate("() => sessionStorage.getItem('garag-key')") == API_KEY
    before = len(asked)  # on load, then each tab's with the wrong key and with the right one
    verify(pg, "The Beatles were formed in Liverpool.")  # the key box loses the focus: no new ask
    badge = pg.locator("article.result[data-config=baseline] .verdict .badge")
    sync_api.expect(badge).to_have_count(1)
    assert len(asked) == before
    held = []
    pg.route("**/v1/configs", lambda route: held.append(route))
    for n, tick in ((1, True), (2, False)):
        pg.evaluate("() => { loadConfigs(); }")  # asked again, the answer held back
        if tick:
            verify(pg, "The Beatles were formed in Liverpool.")
            sync_api.expect(badge).to_have_count(1)
        pg.set_checked("#cfg-baseline", tick)
        for _ in range(100):
            if len(held) == n:
                break
            pg.wait_for_timeout(50)
        assert len(held) == n
        held[-1].continue_()
        sync_api.expect(pg.locator("#cfg-baseline")).to_be_checked(checked=tick)  # as ticked
    pg.unroute("**/v1/configs")
    pg.reload()  # the key stays for the tab
    sync_api.expect(pg.locator("#status")).to_have_text("ready", timeout=30_000)
    sync_api.expect(pg.locator("input.cfg")).to_have_count(1)
    ctx.close()
