"""The Passage and History tabs in a real Chromium (Playwright, as tests/serve/test_browser.py) against
a real uvicorn serving the real pipelines: a passage's claims marked by their verdicts, a click
opening a claim's evidence and graph; history listed, searched, opened and exported."""

from __future__ import annotations

import json

from .conftest import XSS_CLAIM, serving
from .test_api import with_settings
from .test_browser import browser, page, sync_api  # noqa: F401 - the fixtures, shared

FIVE = (
    "The Beatles were formed in Liverpool in 1960. I think they are the best band ever!\n\n"
    "John Lennon was born in 1940. Was Sandra Bullock ever a producer? Snowpiercer is a romantic comedy."
)


def check_passage(pg, passage: str, config: str) -> None:
    pg.click("#tab-passage")
    sync_api.expect(pg.locator("#passage-config option")).to_have_count(3, timeout=30_000)
    pg.select_option("#passage-config", config)
    pg.fill("#passage", passage)
    pg.click("#passage-btn")
    sync_api.expect(pg.locator("#passage-btn")).to_be_enabled(timeout=60_000)


def test_a_passage_marks_each_claim_by_its_verdict_and_a_click_opens_its_evidence(page):  # noqa: F811
    check_passage(page, FIVE, "graph")
    marks = page.locator("#passage-text mark.claim")
    sync_api.expect(marks).to_have_count(3)
    assert page.locator("#passage-text").inner_text().split() == FIVE.split()  # the text as written
    assert page.evaluate("() => document.getElementById('passage-text').textContent") == FIVE
    assert [marks.nth(i).inner_text() for i in range(3)] == [
        "The Beatles were formed in Liverpool in 1960.", "John Lennon was born in 1940.",
        "Snowpiercer is a romantic comedy."]  # fmt: skip
    classes = [marks.nth(i).get_attribute("class") for i in range(3)]
    badges = page.locator("ol.passage-claims li .badge")
    labels = [badges.nth(i).inner_text() for i in range(3)]
    css = {"SUPPORTS": "supports", "REFUTES": "refutes", "NOT ENOUGH INFO": "not-enough-info"}
    assert classes == [f"claim {css[x]}" for x in labels]  # each mark coloured by its own verdict
    skipped = page.locator("#passage-text span.skipped")
    sync_api.expect(skipped).to_have_count(2)
    assert "first person" in skipped.first.get_attribute("title")
    marks.nth(1).click()
    detail = page.locator("#passage-detail")
    sync_api.expect(detail.locator("article.result")).to_have_count(1)
    assert detail.locator("h3 .claim-text").inner_text() == "John Lennon was born in 1940."
    assert detail.locator("ol.evidence li").count() >= 1
    assert detail.locator(".verdict .badge").inner_text() == labels[1]
    sync_api.expect(detail.locator(".graph canvas").first).to_be_attached(timeout=10_000)
    assert "selected" in marks.nth(1).get_attribute("class")
    marks.nth(0).press("Enter")  # the keyboard opens a claim too
    sync_api.expect(detail.locator("h3 .claim-text")).to_have_text(
        "The Beatles were formed in Liverpool in 1960."
    )
    assert page.errors == []


def test_markup_in_a_passage_renders_as_text(page):  # noqa: F811
    check_passage(page, XSS_CLAIM + " John Lennon was born in 1940.", "baseline")
    sync_api.expect(page.locator("#passage-text")).to_contain_text("<script>window.__xss = 1</script>")
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
    assert page.errors == []


def test_history_is_listed_searched_opened_and_exported(browser, service, tmp_path):  # noqa: F811
    import httpx

    claims = ["The Beatles were formed in Liverpool.", "Snowpiercer is a romantic comedy.",
              "Liverpool is a city in England."]  # fmt: skip
    with serving(with_settings(service, state_dir=tmp_path)) as server:
        for c in claims:
            assert httpx.post(f"{server.url}/v1/verify", json={"claim": c}, timeout=60).status_code == 200
        ctx = browser.new_context(accept_downloads=True)
        pg = ctx.new_page()
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        listed: list[str] = []  # the list's requests: the tab's, then the search's, and no more
        pg.on("request", lambda r: listed.append(r.url) if "/v1/history?" in r.url else None)
        pg.goto(server.url + "/")
        pg.click("#tab-history")
        rows = pg.locator("#history-table tbody tr")
        sync_api.expect(rows).to_have_count(3, timeout=30_000)
        assert [rows.nth(i).locator("td.claim-text").inner_text() for i in range(3)] == claims[::-1]
        pg.fill("#h-q", "liverpool")
        sync_api.expect(rows).to_have_count(2)
        sync_api.expect(pg.locator("#history-count")).to_have_text("2 verifications")
        rows.first.click()
        detail = pg.locator("#history-detail")
        sync_api.expect(detail.locator("article.result ol.evidence li")).to_have_count(3)
        assert detail.locator(".claim-text").first.inner_text() == claims[2]
        # Leaving the text box (the click above) does not list again: a second listing could
        # replace the row between the press and the release of the click, which then opens nothing.
        assert len(listed) == 2 and "q=liverpool" in listed[1]
        with pg.expect_download() as download:
            pg.click("#h-export-jsonl")
        lines = [json.loads(x) for x in open(download.value.path(), encoding="utf-8").read().splitlines()]
        assert [x["claim"] for x in lines] == [claims[0], claims[2]]  # the search applies to the export
        assert download.value.suggested_filename.endswith(".jsonl")
        with pg.expect_download() as download:
            pg.click("#h-export-csv")
        assert open(download.value.path(), encoding="utf-8").read().count("\n") == 3
        pg.click("#h-delete")
        sync_api.expect(rows).to_have_count(1)
        ctx.close()
    assert errors == []
