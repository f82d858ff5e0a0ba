"""Screenshots of the web page for the README, from a running ``garag serve`` (real chromium).

    garag serve --set paths.cache_dir=...            # the default configs on the embedded FEVER data
    python docs/screenshots.py --url http://127.0.0.1:8000

Writes docs/img/serve-claim.png (a claim, both configs, the graph's fact graph) and
docs/img/serve-runs.png (the run browser: a compare run filtered to the claims where the systems
disagree, one of them opened).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

OUT = Path(__file__).parent / "img"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--claim", default="Jenna Jameson worked as a glamor model and a stripper.")
    ap.add_argument("--run", default="fever-report-baseline-vs-graph")
    ap.add_argument("--run-claim", default="21775", help="claim id opened in the run browser")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    exe = os.environ.get("GARAG_CHROMIUM") or shutil.which("chromium")
    if exe is None:
        print("screenshots: no chromium on PATH (apt-get install chromium)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1500, "height": 1250})
        page.goto(args.url + "/")
        expect(page.locator("#status")).to_have_text("ready", timeout=300_000)
        page.fill("#claim", args.claim)
        page.click("#verify-btn")
        expect(page.locator("#verify-btn")).to_be_enabled(timeout=120_000)
        page.wait_for_timeout(1500)  # the graph layout settles
        page.evaluate(
            "() => { const cy = document.querySelector('.graph[data-config=graph]')._cy;"
            " const top = cy.nodes('[kind = \"entity\"]').sort((a, b) => b.width() - a.width())[0];"
            " top.select(); top.emit('tap'); }"
        )
        page.screenshot(path=str(args.out / "serve-claim.png"), full_page=True)
        page.click("#tab-runs")
        page.select_option("#run-select", args.run)
        expect(page.locator("#claims-table tbody tr").first).to_be_visible(timeout=60_000)
        page.select_option("#f-disagree", "true")
        row = page.locator(f"#claims-table tr[data-id='{args.run_claim}']")
        expect(row).to_be_visible(timeout=30_000)
        row.click()
        expect(page.locator("#claim-detail article.result")).to_have_count(2)
        page.evaluate("() => window.scrollTo(0, 0)")
        page.screenshot(path=str(args.out / "serve-runs.png"), full_page=True)
        browser.close()
    print(f"written: {args.out / 'serve-claim.png'}, {args.out / 'serve-runs.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
