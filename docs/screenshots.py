"""Take the Dagster UI screenshots the docs show: docs/images/<name>.png.

    uv run python docs/screenshots.py [NAME ...]

Starts `lake dev` in a temporary LAKE_HOME on free ports (the suite's `lake_dev` helper, as
`benchmarks/freshness.py` does), lands the insurance samples and TPC-DS at scale 0.01 the way a
user would, waits until the sensors applied them and the reports refreshed, back-fills a month of
`web_sales`, then opens each page of `SHOTS` (or only those named) in Debian's chromium through
playwright (`apt-get install -y chromium`: playwright's own browser download cannot work offline)
and saves it under docs/images/. Commit the images it changed.

The UI test (`lake_assets_tests/ui/test_dagster_ui.py`) opens the same pages and checks what they
show; its screenshots stay in its temporary folder, so the suite never rewrites these.
"""

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from playwright.sync_api import Page, sync_playwright  # noqa: E402

from lake_assets_tests.helpers.lake_dev import REPO, LakeDev, lake_dev, wait_for  # noqa: E402

IMAGES = HERE / "images"
REPORTS = ("q12", "q41", "q86", "q92", "sales_by_hour", "top_customers")


@dataclass(frozen=True)
class Shot:
    """One page of the Dagster UI, as the docs show it."""

    name: str  #: saved as docs/images/<name>.png
    route: str  #: the page's path in the UI; "run:<job>" is the newest run of that job
    shows: tuple[str, ...]  #: texts the page shows once it has loaded
    click: str = ""  #: a control to click first (exact text), e.g. the list view of an asset group
    then_shows: tuple[str, ...] = ()  #: texts shown after that click


SHOTS = (
    Shot("lineage", "/asset-groups", ("insurance", "raw", "tpcds", "tpcds_reports")),
    Shot("web_sales_partitions", "/assets/tpcds/web_sales?view=partitions", ("Partitions Selected",)),
    Shot("web_sales_checks", "/assets/tpcds/web_sales?view=checks", ("web_sales_rows_match_raw",)),
    Shot("insurance_checks", "/assets/insurance?view=checks", ("schema_matches_contract",)),
    Shot("reports", "/locations/__repository__@lake/asset-groups/tpcds_reports", ("report_q12",),
         click="List", then_shows=("report_top_customers",)),
    Shot("quarantine", "/assets/insurance_quarantine", ("quarantined_bad_date", "refused_files")),
    Shot("ledger", "/assets/lake_ledger", ("insurance_rows_applied", "insurance_rows_quarantined")),
    Shot("runs", "/runs", ("apply_insurance", "load_tpcds", "lake/table")),
    Shot("run", "run:apply_insurance", ("apply_insurance", "RUN_SUCCESS")),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"only these ({', '.join(shot.name for shot in SHOTS)})")
    names = set(parser.parse_args().names)
    unknown = names - {shot.name for shot in SHOTS}
    if unknown:
        parser.error(f"no such screenshot: {', '.join(sorted(unknown))}")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        parser.error("Debian's chromium is needed: apt-get install -y chromium")
    with tempfile.TemporaryDirectory(prefix="lake-docs-screenshots-") as folder, lake_dev(Path(folder)) as dev:
        land_and_wait(dev)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            # Dagster asks new visitors to join its community once; a user would click Skip.
            page.add_init_script("window.localStorage.setItem('communityNux', '1')")
            page.goto(dev.login_url)  # the address lake dev printed: its token sets the cookie
            for shot in SHOTS:
                if not names or shot.name in names:
                    take(page, dev, shot)
                    print(f"docs/images/{shot.name}.png")
            browser.close()


def land_and_wait(dev: LakeDev) -> None:
    """Land what a user would and wait until the sensor-launched runs applied it."""
    for file, prefix in (("data/fullload/full-load.csv", "fullload"), ("data/cdcload/20240401-090000000.csv", "cdcload"),
                         ("data/cdcload/20240402-090000000.csv", "cdcload")):
        _ok(dev.lake("put", str(REPO / file), "--to", prefix))
        wait_for(lambda: _nothing_pending(dev), 600, f"{file} to be applied", interval=2)
    _ok(dev.lake("tpcds", "generate", "--scale", "0.01"))
    wait_for(lambda: _nothing_pending(dev), 1200, "the TPC-DS star to be loaded", interval=3)
    wait_for(lambda: _reports_refreshed(dev), 600, "the report tables, refreshed after the star loaded", interval=5)
    _ok(dev.lake("backfill", "tpcds.web_sales", "--from", "1999-02-01", "--to", "1999-02-28"))


def take(page: Page, dev: LakeDev, shot: Shot) -> None:
    route = shot.route
    if route.startswith("run:"):
        route = f"/runs/{_newest_run(dev, route.removeprefix('run:'))}"
    page.goto(dev.url + route)
    for text in shot.shows:
        page.get_by_text(text, exact=False).first.wait_for(state="attached", timeout=60_000)
    if shot.click:
        page.get_by_text(shot.click, exact=True).first.click()
        for text in shot.then_shows:
            page.get_by_text(text, exact=False).first.wait_for(state="attached", timeout=60_000)
    # the UI polls: wait until nothing on the page is still loading or materializing (a count such as
    # the partition view's "Materializing (0)" is a filter's label, not a status)
    page.wait_for_function("() => !/Loading|Materializing(?! \\()/.test(document.body.innerText)", timeout=180_000)
    page.wait_for_load_state("networkidle")
    IMAGES.mkdir(exist_ok=True)
    page.screenshot(path=str(IMAGES / f"{shot.name}.png"))


def _newest_run(dev: LakeDev, job: str) -> str:
    """The id of the job's newest run, from the instance `lake dev` keeps under LAKE_HOME."""
    import os

    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(dev.home / "dagster")
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs(dg.RunsFilter(job_name=job), limit=1)
    if not runs:
        raise SystemExit(f"no run of {job} to show")
    return runs[0].run_id


def _nothing_pending(dev: LakeDev) -> bool:
    result = dev.lake("status", "--format", "json")
    return result.returncode == 0 and not any(row["status"].startswith("pending") for row in json.loads(result.stdout))


def _reports_refreshed(dev: LakeDev) -> bool:
    sql = " UNION ALL ".join(f"SELECT count(*) AS n FROM tpcds.report_{name}" for name in REPORTS)
    return dev.lake("query", sql, "--format", "json").returncode == 0


def _ok(result) -> None:  # subprocess.CompletedProcess
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(result.args[1:])} failed: {result.stderr.strip() or result.stdout.strip()}")


if __name__ == "__main__":
    main()
