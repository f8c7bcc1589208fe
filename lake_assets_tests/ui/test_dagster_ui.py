"""The Dagster UI in a real headless browser (Debian's chromium driven by playwright).

Starts `lake dev`, lands data the way a user would, waits for the sensor-launched runs,
then opens the pages a data engineer looks at and checks what they show. The screenshots
are saved beside this file and shown in the README.
"""

import json
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

from lake_assets_tests.helpers.lake_dev import REPO, LakeDev, lake_dev, wait_for

SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.e2e


def _applied(dev: LakeDev) -> bool:
    """Nothing of either domain is pending any more (the sensor-launched runs are done)."""
    result = dev.lake("status", "--format", "json")
    return result.returncode == 0 and not any(row["status"].startswith("pending") for row in json.loads(result.stdout))


def _open(page: Page, dev: LakeDev, route: str, expect: list[str], shot: str) -> str:
    """Open `route`, wait until every text in `expect` shows, save a screenshot, return the page text."""
    page.goto(dev.url + route)
    for text in expect:
        page.get_by_text(text, exact=False).first.wait_for(state="attached", timeout=60_000)
    page.wait_for_load_state("networkidle")
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{shot}.png"))
    return page.inner_text("body")


def test_ui_shows_assets_checks_and_runs(tmp_path: Path) -> None:
    assert CHROMIUM, "Debian's chromium is needed (.ci/run installs it: apt-get install -y chromium)"
    with lake_dev(tmp_path) as dev:
        assert dev.lake("put", str(REPO / "data/fullload/full-load.csv"), "--to", "fullload").returncode == 0
        assert dev.lake("tpcds", "generate", "--scale", "0.01").returncode == 0
        wait_for(lambda: _applied(dev), 1200, "both domains to be applied by sensor-launched runs", interval=3)
        backfill = dev.lake("backfill", "tpcds.web_sales", "--from", "1999-02-01", "--to", "1999-02-28")
        assert backfill.returncode == 0, backfill.stdout + backfill.stderr

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            # Dagster asks new visitors to join its community once; a user would click Skip.
            page.add_init_script("window.localStorage.setItem('communityNux', '1')")
            page.goto(dev.url + "/assets")
            skip = page.get_by_role("button", name="Skip")
            if skip.count():
                skip.first.click()

            lineage = _open(page, dev, "/asset-groups", ["insurance", "raw", "tpcds", "tpcds_reports"], "lineage")
            assert "insurance" in lineage and "tpcds" in lineage

            partitions = _open(page, dev, "/assets/tpcds/web_sales?view=partitions", ["Partitions"],
                               "web_sales_partitions")
            assert "web_sales" in partitions

            star_checks = _open(page, dev, "/assets/tpcds/web_sales?view=checks",
                                ["web_sales_rows_match_raw", "web_sales_referential_integrity"], "web_sales_checks")
            assert "Failed" not in star_checks

            checks = _open(page, dev, "/assets/insurance?view=checks",
                           ["insurance_schema_matches_contract", "insurance_rows_conserved"], "insurance_checks")
            assert "Checks (4)" in checks and "Failed" not in checks

            runs = _open(page, dev, "/runs", ["apply_insurance", "load_tpcds"], "runs")
            assert "Success" in runs
            browser.close()
