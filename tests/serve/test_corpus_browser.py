"""The Corpus tab in a real browser (Debian's chromium through Playwright, as in test_browser.py) against
a real uvicorn serving the real pipelines on a world of their own (tests/serve/corpus_world.py): a page
written in the form is added, retrieved by a claim in the Verify tab, shown by the page lookup, and
removed again; markup in its sentences stays text."""

from __future__ import annotations

import pytest

from garag.text import detokenize

from .conftest import serving
from .corpus_world import make_configs, make_service, page_name

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
from .test_browser import browser  # noqa: E402, F401 - the chromium fixture (skips where there is none)

expect = sync_api.expect
NAME = page_name(42)
MARKUP = '<img src=x onerror="window.__xss=4"> Its motto is <b>light</b> .'


@pytest.fixture(scope="module")
def corpus_server(world, tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus-page")
    configs = make_configs(world, root)
    svc = make_service([configs["baseline"], configs["other"]], root)
    with serving(svc) as srv:
        yield srv
    svc.close()


def test_a_page_added_through_the_page_is_retrieved_then_removed(browser, corpus_server):  # noqa: F811
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: m.type == "error" and errors.append(m.text))
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(corpus_server.url + "/")
    expect(pg.locator("#status")).to_have_text("ready", timeout=30_000)
    pg.click("#tab-corpus")
    row = pg.locator("#corpus-table tr[data-config=baseline]")
    expect(row.locator("td.pages")).to_have_text("13", timeout=30_000)
    expect(pg.locator("#corpus-table tr[data-config=other] td.pages")).to_have_text("6")
    version = row.locator("td.version").inner_text()
    expect(pg.locator("#corpus-shared")).to_have_text(
        " edits apply to baseline (not to other: another corpus)"
    )

    pg.fill("#corpus-page-id", NAME)
    pg.fill(
        "#corpus-page-lines", f"{NAME} is a glimmerstone village in the Vellmoria highlands .\n\n{MARKUP}\n"
    )
    pg.click("#corpus-add-btn")
    update = pg.locator("#corpus-update .update")
    expect(update).to_have_attribute("data-status", "done", timeout=120_000)
    expect(row.locator("td.pages")).to_have_text("14")
    assert row.locator("td.version").inner_text() != version
    expect(pg.locator("#corpus-table tr[data-config=other] td.pages")).to_have_text("6")
    assert pg.input_value("#corpus-page-id") == ""  # the form is cleared for the next page
    expect(pg.locator("#corpus-updates li")).to_have_count(1)

    pg.fill("#corpus-lookup-id", NAME)
    pg.click("#corpus-lookup button")
    sentences = pg.locator("#corpus-page li .text")
    expect(sentences).to_have_count(2)
    expect(sentences.nth(1)).to_have_text(detokenize(MARKUP))  # shown as text (spacing undone as elsewhere)

    pg.click("#tab-verify")
    pg.fill("#claim", f"{NAME} is a village in the Vellmoria highlands.")
    pg.click("#verify-btn")
    expect(pg.locator("#verify-btn")).to_be_enabled(timeout=60_000)
    found = pg.locator(f'article.result[data-config=baseline] ol.evidence li[data-sid="{NAME} (0)"]')
    expect(found).to_have_count(1)
    expect(pg.locator("article.result[data-config=other] .verdict .badge")).to_have_count(1)  # its own corpus
    assert pg.locator(f'article.result[data-config=other] ol.evidence li[data-sid^="{NAME}"]').count() == 0

    pg.click("#tab-corpus")
    pg.fill("#corpus-remove-ids", "No_Such_Page\n")
    pg.click("#corpus-remove-btn")
    expect(pg.locator("#corpus-error")).to_have_text(
        "422: ids: not in the corpus of baseline: 'No_Such_Page'"
    )
    added = update.get_attribute("data-id")
    pg.fill("#corpus-remove-ids", f"  {NAME}\n")
    pg.click("#corpus-remove-btn")
    expect(pg.locator("#corpus-error")).to_be_hidden()
    expect(update).not_to_have_attribute("data-id", added)
    expect(update).to_have_attribute("data-status", "done", timeout=120_000)
    expect(row.locator("td.pages")).to_have_text("13")
    expect(pg.locator("#corpus-updates li")).to_have_count(2)
    assert pg.evaluate("() => window.__xss") is None
    assert pg.locator("main img").count() == 0
    # the one console error is chromium's line for the refused removal
    assert errors == [
        "Failed to load resource: the server responded with a status of 422 (Unprocessable Entity)"
    ]
    ctx.close()
