"""The Dagster UI in a real headless browser (Debian's chromium driven by playwright).

Starts `lake dev`, lands data the way a user would, waits for the sensor-launched runs
and the report refresh that follows the star load, then opens the pages a data engineer
looks at and checks what they show. Its screenshots stay in its tmp_path (the ones the docs
show are taken by docs/screenshots.py). Last, `lake dev`'s own terminal: one line per run, no Dagster INFO logs.
"""

import json
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

from lake_assets_tests.helpers.lake_dev import REPO, LakeDev, lake_dev, wait_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.e2e

#: How long the lake must have run nothing, after the backfill, for the pages to be at rest.
IDLE_SECONDS = 60
#: Keys of run tags that are bookkeeping (hidden in the UI); a person sees lake/table.
BOOKKEEPING = ("lake_pid", "lake_host", "lake_process_started", "lake_first_object",
               "lake_last_object", ".dagster/", "lake/pid", "lake/host", "process_started")


def _applied(dev: LakeDev) -> bool:
    """Nothing of either domain is pending any more (the sensor-launched runs are done)."""
    result = dev.lake("status", "--format", "json")
    return result.returncode == 0 and not any(row["status"].startswith("pending") for row in json.loads(result.stdout))


def _reports_refreshed(dev: LakeDev) -> bool:
    """Every report table exists (the automation sensor refreshed them after the star loaded)."""
    sql = " UNION ALL ".join(f"SELECT count(*) AS n FROM tpcds.report_{name}"
                             for name in ("q12", "q41", "q86", "q92", "sales_by_hour", "top_customers"))
    return dev.lake("query", sql, "--format", "json").returncode == 0


def _reports_refreshed_after_backfill(dev: LakeDev) -> bool:
    """`lake dev`'s terminal has a finished report refresh after the `lake backfill` run."""
    terminal = dev.log.read_text()
    backfill = terminal.find("(lake backfill)")
    return backfill >= 0 and re.search(r"^\d\d:\d\d:\d\d run \w{8} assets \w+ .*\(tpcds_reports_after_star\)$",
                                       terminal[backfill:], re.MULTILINE) is not None


def _refreshed_or_at_rest(dev: LakeDev) -> Callable[[], bool]:
    """A check: the reports were refreshed after the backfill, or no run has been active for IDLE_SECONDS."""
    busy_at = time.monotonic()

    def check() -> bool:
        nonlocal busy_at
        if _reports_refreshed_after_backfill(dev):
            return True
        if not dev.idle():
            busy_at = time.monotonic()
        return time.monotonic() - busy_at >= IDLE_SECONDS

    return check


def _show_reports(page: Page, dev: LakeDev) -> None:
    """The report group's list view: every report with its latest materialization."""
    page.goto(dev.url + "/locations/__repository__@lake/asset-groups/tpcds_reports")
    page.get_by_text("report_q12").first.wait_for(state="attached", timeout=60_000)
    page.get_by_text("List", exact=True).first.click()
    page.get_by_text("report_top_customers").first.wait_for(state="attached", timeout=60_000)


def _settled(page: Page, show: Callable[[], None], shot: Path, timeout: float = 300) -> str:
    """The text of the page `show` opens, once nothing on it is loading or materializing: a slow
    GraphQL answer on a loaded machine can leave a cell loading, so the page is opened again while
    it waits. Fails with what the page showed (and its screenshot in `shot`)."""
    deadline = time.monotonic() + timeout
    while True:
        show()
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(shot))
        text = page.inner_text("body")
        if not re.search(r"Loading|Materializing", text):
            return text
        assert time.monotonic() < deadline, f"still loading after {timeout:.0f} s (screenshot {shot}):\n{text}"
        page.wait_for_timeout(10_000)


def _open(page: Page, dev: LakeDev, route: str, expect: list[str], shot: Path) -> str:
    """Open `route`, wait until every text in `expect` shows, save a screenshot to `shot`, return the page text."""
    page.goto(dev.url + route)
    for text in expect:
        page.get_by_text(text, exact=False).first.wait_for(state="attached", timeout=60_000)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(shot))
    return page.inner_text("body")


def test_ui_shows_assets_checks_and_runs(tmp_path: Path) -> None:
    assert CHROMIUM, "Debian's chromium is needed (.ci/run installs it: apt-get install -y chromium)"
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with lake_dev(tmp_path) as dev:
        assert dev.lake("put", str(REPO / "data/fullload/full-load.csv"), "--to", "fullload").returncode == 0
        assert dev.lake("tpcds", "generate", "--scale", "0.01").returncode == 0
        wait_for(lambda: _applied(dev), 1200, "both domains to be applied by sensor-launched runs", interval=3)
        wait_for(lambda: _reports_refreshed(dev), 600, "the report tables, refreshed after the star loaded",
                 interval=5)
        backfill = dev.lake("backfill", "tpcds.web_sales", "--from", "1999-02-01", "--to", "1999-02-28")
        assert backfill.returncode == 0, backfill.stdout + backfill.stderr
        # the backfill changed the star, so the automation sensor refreshes the reports once more
        # (when it does is tpcds/test_report_automation.py's, deterministically). The pages below need
        # a lake at rest, not that refresh, so the wait also ends once no run has been active for
        # IDLE_SECONDS: the daemon's timing under a loaded CI machine is not this test's subject.
        wait_for(_refreshed_or_at_rest(dev), 600, "the reports' refresh after the backfill, or a lake at rest",
                 interval=3)

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            # Dagster asks new visitors to join its community once; a user would click Skip.
            page.add_init_script("window.localStorage.setItem('communityNux', '1')")
            stranger = browser.new_context().new_page()  # a browser that never opened the address with the token
            assert stranger.goto(dev.url + "/assets").status == 401
            page.goto(dev.login_url)  # the address lake dev printed: its token sets the cookie, as for a user
            page.goto(dev.url + "/assets")
            skip = page.get_by_role("button", name="Skip")
            if skip.count():
                skip.first.click()

            lineage = _open(page, dev, "/asset-groups", ["insurance", "raw", "tpcds", "tpcds_reports"], shots / "lineage.png")
            assert "insurance" in lineage and "tpcds" in lineage

            partitions = _open(page, dev, "/assets/tpcds/web_sales?view=partitions", ["Partitions"],
                               shots / "web_sales_partitions.png")
            assert "web_sales" in partitions

            star_checks = _open(page, dev, "/assets/tpcds/web_sales?view=checks",
                                ["web_sales_rows_match_raw", "web_sales_referential_integrity"], shots / "web_sales_checks.png")
            assert "Failed" not in star_checks

            checks = _open(page, dev, "/assets/insurance?view=checks",
                           ["schema_matches_contract", "rows_conserved"], shots / "insurance_checks.png")
            assert "Checks (4)" in checks and "Failed" not in checks

            reports = _settled(page, lambda: _show_reports(page, dev), shots / "reports.png")
            assert "report_sales_by_hour" in reports and "Never materialized" not in reports
            assert reports.count("Materialized") >= 6, reports  # one status per report

            # the ledger in the UI: every run's rows per outcome, the quarantine per reason
            quarantine = _open(page, dev, "/assets/insurance_quarantine", ["quarantined_bad_date", "refused_files"],
                               shots / "quarantine.png")
            assert "quarantined_no_sequence" in quarantine, quarantine
            ledger = _open(page, dev, "/assets/lake_ledger", ["insurance_rows_applied"], shots / "ledger.png")
            assert "insurance_rows_quarantined" in ledger and "insurance_files_applied" in ledger, ledger

            # a run the CLI executed (`lake backfill` above) is on its job's page, as the UI's own are
            job_runs = _open(page, dev, "/locations/__repository__@lake/jobs/load_tpcds/runs",
                             ["lake/launched_by: lake backfill"], shots / "job_runs.png")
            assert "load_tpcds" in job_runs

            runs = _open(page, dev, "/runs", ["apply_insurance", "load_tpcds", "lake/table"], shots / "runs.png")
            assert "Success" in runs and "lake/table: tpcds" in runs
            assert not [key for key in BOOKKEEPING if key in runs], runs
            page.get_by_text("View all tags").first.click()
            page.get_by_role("dialog").first.wait_for(timeout=30_000)
            tags = page.get_by_role("dialog").first.inner_text()
            assert "lake/table" in tags and not [key for key in BOOKKEEPING if key in tags], tags
            browser.close()

    terminal = dev.log.read_text()
    run_lines = re.findall(r"^\d\d:\d\d:\d\d run \w{8} (\S+) (\w+) .*$", terminal, re.MULTILINE)
    assert ("apply_insurance", "SUCCESS") in run_lines and ("load_tpcds", "SUCCESS") in run_lines, terminal
    assert re.search(r"^\d\d:\d\d:\d\d run \w{8} assets SUCCESS .*tpcds\.report_.*\(tpcds_reports_after_star\)$",
                     terminal, re.MULTILINE), terminal
    assert " - INFO - " not in terminal and " - DEBUG - " not in terminal, terminal[-3000:]
