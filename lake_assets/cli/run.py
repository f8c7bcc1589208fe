"""`lake run` and `lake demo`: apply what is pending through the Dagster job."""

from pathlib import Path
from typing import Annotated

import dagster as dg
import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import Format, console, errors
from lake_assets.cli.query import show_history, show_query
from lake_assets.cli.raw import ZONES
from lake_assets.cli.session import REPO_ROOT, LakeSession, lake_session
from lake_assets.core.errors import UsageError
from lake_assets.core.formats.delta import open_table
from lake_assets.core.tables import table
from lake_assets.insurance.contract import TABLE

SEED_QUERY = ("SELECT * FROM insurance WHERE policy_id IN (100462,100463,100475,110001,110002) "
              "ORDER BY policy_id")


def run_pending(lake: LakeSession) -> dg.ExecuteInProcessResult:
    """Apply everything pending through the Dagster job (same assets and checks as the daemon)."""
    from lake_assets.definitions import build_definitions

    job = build_definitions(lake.settings).resolve_job_def("apply_insurance")
    quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    return job.execute_in_process(run_config=quiet, instance=lake.instance(), raise_on_error=False,
                                  tags={"lake/launched_by": "lake run"})


def report_run(result: dg.ExecuteInProcessResult) -> bool:
    """Print what the run did; True if it and all its checks succeeded."""
    for event in result.get_asset_materialization_events():
        materialization = event.materialization
        if materialization.asset_key == dg.AssetKey(TABLE):
            meta = {k: v.value for k, v in materialization.metadata.items()}
            console.print(
                f"insurance: version {meta['delta_version_before']} -> {meta['delta_version']}, "
                f"rows {meta['rows_before']} -> {meta['rows_after']} "
                f"(+{meta['rows_inserted']} inserted, {meta['rows_updated']} updated, "
                f"{meta['rows_deleted']} deleted, {meta['rows_superseded']} superseded, "
                f"{meta['rows_quarantined']} quarantined) in {meta['duration_seconds']} s"
            )
    return report_checks(result)


def report_checks(result: dg.ExecuteInProcessResult) -> bool:
    """Print each check's outcome and any step failure; True if the run and its checks passed."""
    checks_ok = True
    for evaluation in result.get_asset_check_evaluations():
        warning = evaluation.severity == dg.AssetCheckSeverity.WARN
        mark = ("[green]passed[/green]" if evaluation.passed
                else "[yellow]warning[/yellow]" if warning else "[red]FAILED[/red]")
        checks_ok &= evaluation.passed or warning
        console.print(f"  check {evaluation.check_name}: {mark}")
    if not result.success:
        for event in result.all_events:
            if event.is_failure and event.step_failure_data is not None:
                errors.print(f"[red]step failed:[/red] {event.step_failure_data.error.message.strip()}")
    return result.success and checks_ok


@app.command()
@friendly
def run() -> None:
    """Apply everything pending now, synchronously, without the daemon."""
    from lake_assets.cli.backfill import run_tpcds_pending

    with lake_session() as lake:
        insurance_ok = report_run(run_pending(lake))
        tpcds_ok = run_tpcds_pending(lake)
        if not (insurance_ok and tpcds_ok):
            raise typer.Exit(1)


@app.command()
@friendly
def demo(
    data: Annotated[Path, typer.Option(help="folder with fullload/ and cdcload/ samples")] = REPO_ROOT / "data",
    fresh: Annotated[bool, typer.Option(help="first delete this lake's raw and curated data (embedded S3 only)")] = False,
) -> None:
    """The seed's walkthrough: full load, query, CDC batches, query again, table history."""
    with lake_session() as lake:
        if fresh:
            if not lake.storage.embedded:
                raise UsageError("--fresh only works on the embedded S3 server, never on LAKE_S3_ENDPOINT")
            for prefix in ("raw/", "staging/", "curated/"):
                lake.storage.delete_prefix(prefix)
        if open_table(lake.storage, table(TABLE)) is not None and not fresh:
            console.print("[yellow]note:[/yellow] this lake already has an insurance table; samples already "
                          "applied change nothing (start over with `lake demo --fresh`).")
        for zone, prefix in ZONES.items():
            files = sorted((data / zone).glob("*.csv"))
            if not files:
                raise FileNotFoundError(f"no sample CSV files in {data / zone}")
            for file in files:
                lake.storage.put_bytes(prefix + file.name, file.read_bytes())
                console.print(f"put {lake.storage.uri(prefix + file.name)}")
            ok = report_run(run_pending(lake))
            console.rule(f"after the {zone} files")
            show_query(lake, SEED_QUERY, Format.table)
            if not ok:
                raise typer.Exit(1)
        console.rule("insurance history")
        show_history(lake, TABLE, Format.table)
        console.rule("insurance_quarantine")
        show_query(lake, "SELECT source_file, line_number, reason, detail, raw_text FROM insurance_quarantine "
                         "ORDER BY source_file, line_number", Format.table)
