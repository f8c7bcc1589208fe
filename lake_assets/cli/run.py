"""`lake run` and `lake demo`: apply what is pending through the Dagster job.

Dagster and the engine are imported when the command runs (cli/job_runner.py), not when `lake` starts.
"""

from pathlib import Path
from typing import Annotated

import typer

from lake_assets.cli.app import EXIT_FAILED, EXIT_OK, app, friendly
from lake_assets.cli.output import Format, console
from lake_assets.cli.history import show_history
from lake_assets.cli.query import show_query
from lake_assets.cli.raw import ZONES, zone_prefix
from lake_assets.cli.session import REPO_ROOT, LakeSession, lake_session
from lake_assets.core.errors import UsageError
from lake_assets.core.apply.resolve import AUDIT

#: The seed's query, on the seed's columns: `SELECT *` would add the audit columns (and
#: columns later contract versions added), which `lake demo` names instead of printing.
SEED_KEYS = "policy_id IN (100462,100463,100475,110001,110002)"
#: The seed's nine columns (insurance's first contract version, lake_assets/tables/insurance.yaml).
SEED_COLUMNS = ("policy_id", "expiry_date", "location_name", "state_code", "region_name", "insured_value",
                "business_type", "earthquake_coverage", "flood_coverage")
SEED_QUERY = f"SELECT {', '.join(SEED_COLUMNS)} FROM insurance WHERE {SEED_KEYS} ORDER BY policy_id"
AUDIT_HINT = (f"(the seed's columns; every row also carries {', '.join(AUDIT)}: "
              f'lake query "SELECT * FROM insurance WHERE {SEED_KEYS}")')


@app.command()
@friendly
def run(
    reapply: Annotated[bool, typer.Option("--reapply", help="also apply again the files `lake restore` reverted")]
    = False,
) -> None:
    """Apply everything pending in both domains now, synchronously, without the daemon.

    Exit code 0: all applied and every check passed; 1: a run or a blocking check failed;
    3: the runs succeeded but refused whole files (listed; see `lake status`). Every file
    pending when it starts is reported, and counts, whichever run applied it (the sensor's too).
    """
    from lake_assets.cli.fates import pending_snapshot, stopped_runs
    from lake_assets.core.registry import declarations

    with lake_session() as lake:
        snapshot = pending_snapshot(lake.storage, reapply)
        if not snapshot and not stopped_runs(lake.storage):  # no run to launch: Dagster stays unloaded
            for name in [*(d.name for d in declarations()), "tpcds"]:
                console.print(f"{name}: nothing pending")
            return
        from lake_assets.cli.job_runner import apply_everything

        code = apply_everything(lake, snapshot, reapply)
    if code != EXIT_OK:
        raise typer.Exit(code)


@app.command()
@friendly
def demo(
    data: Annotated[Path, typer.Option(help="folder with fullload/ and cdcload/ samples")] = REPO_ROOT / "data",
    fresh: Annotated[bool, typer.Option(help="first delete this lake's raw and curated data (embedded S3 only)")] = False,
) -> None:
    """The seed's walkthrough (full load, query, CDC batches, query again, history), then the TPC-DS star and a report."""
    from lake_assets.core.formats.delta import open_table
    from lake_assets.core.tables import table
    from lake_assets.tpcds.schema import NAMESPACE as TPCDS_NAMESPACE

    with lake_session() as lake:
        if fresh:
            if not lake.storage.embedded:
                raise UsageError("--fresh only works on the embedded S3 server, never on LAKE_S3_ENDPOINT")
            for prefix in ("raw/", "staging/", "curated/"):
                lake.storage.delete_prefix(prefix)
            lake.storage.catalog().drop_namespace(TPCDS_NAMESPACE)  # the Iceberg star lives in the catalog
        if open_table(lake.storage, table("insurance")) is not None and not fresh:
            console.print("[yellow]note:[/yellow] this lake already has an insurance table; samples already "
                          "applied change nothing (start over with `lake demo --fresh`).")
        demo_insurance(lake, data)
        demo_star(lake)


def demo_insurance(lake: LakeSession, data: Path) -> None:
    """The seed's walkthrough: the full load, its query, the CDC batches, the query again,
    the history and the quarantine (typer.Exit with the run's code if a run fails)."""
    from lake_assets.cli.job_runner import report_run, run_pending

    for zone in ZONES:
        _, prefix = zone_prefix(zone)
        files = sorted((data / zone).glob("*.csv"))
        if not files:
            raise FileNotFoundError(f"no sample CSV files in {data / zone}")
        for file in files:
            lake.storage.put_bytes(prefix + file.name, file.read_bytes())
            console.print(f"put {lake.storage.uri(prefix + file.name)}")
        code = report_run(run_pending(lake))
        console.rule(f"after the {zone} files")
        show_query(lake, SEED_QUERY, Format.table)
        console.print(AUDIT_HINT)
        if code != EXIT_OK:
            raise typer.Exit(code)
    console.rule("insurance history")
    show_history(lake, "insurance", Format.table)
    console.rule("insurance_quarantine")
    show_query(lake, "SELECT source_file, line_number, reason, detail, raw_text FROM insurance_quarantine "
                     "ORDER BY source_file, line_number", Format.table)


#: Scale of the TPC-DS star `lake demo` builds (about 7,200 web_sales rows).
DEMO_SCALE = 0.01
DEMO_REPORT = ("SELECT i_category, i_class, i_item_id, itemrevenue, round(revenueratio, 2) AS revenueratio "
               "FROM tpcds.report_q12 ORDER BY i_category, i_class, i_item_id LIMIT 10")


def demo_star(lake: LakeSession) -> None:
    """The second domain: land TPC-DS at a small scale, load the Iceberg star, print one report."""
    from lake_assets.cli.progress import step_progress
    from lake_assets.cli.tpcds_runs import run_tpcds_pending
    from lake_assets.tpcds.generate import generate

    console.rule(f"TPC-DS web_sales star on Iceberg (scale {DEMO_SCALE})")
    with step_progress() as progress:
        landed = generate(lake.storage, DEMO_SCALE, progress=progress)
    console.print(f"landed {landed.objects} raw objects under {lake.storage.uri('raw/tpcds/')}")
    if not run_tpcds_pending(lake).ok:
        raise typer.Exit(EXIT_FAILED)
    console.rule("report: TPC-DS query 12 (first rows), from tpcds.report_q12")
    show_query(lake, DEMO_REPORT, Format.table)
