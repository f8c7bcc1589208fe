"""`lake run` and `lake demo`: apply what is pending through the Dagster job."""

import contextlib
import logging
import warnings
from collections.abc import Iterator
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
from lake_assets.core.ledger import REJECTED
from lake_assets.core.tables import table
from lake_assets.resources.catalog import lake_catalog
from lake_assets.tpcds.schema import NAMESPACE as TPCDS_NAMESPACE
from lake_assets.insurance.contract import TABLE
from lake_assets.runs import process_tags, reap_dead_runs

SEED_QUERY = ("SELECT * FROM insurance WHERE policy_id IN (100462,100463,100475,110001,110002) "
              "ORDER BY policy_id")


#: `lake run` exit codes (README): 0 all applied and checks green; 1 the run or a check failed;
#: 3 the run succeeded but refused whole files (see `lake status`).
EXIT_OK, EXIT_FAILED, EXIT_FILES_REFUSED = 0, 1, 3


def execute(lake: LakeSession, job_name: str, launched_by: str, tags: dict[str, str] | None = None,
            config: dict | None = None, **options: object) -> dg.ExecuteInProcessResult:
    """Run a job of the code location in this process (same assets and checks as the daemon).

    Dagster's and the engine's own logs go to the run's event log (see the Dagster UI), not to
    the terminal: the command prints its own summary and one line per failure. The run is
    tagged with this process, so `reap_dead_runs` can fail it if the command is killed.
    `config` is the run config of the job's ops (`{"ops": {...}}`).
    """
    quiet = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    with _quiet_loggers():
        from lake_assets.definitions import build_definitions

        job = build_definitions(lake.settings).resolve_job_def(job_name)
        reap_dead_runs(lake.instance())  # runs killed earlier must not hold the table's slot
        return job.execute_in_process(run_config={**quiet, **(config or {})}, instance=lake.instance(), raise_on_error=False,
                                      tags={**(tags or {}), "lake/launched_by": launched_by, **process_tags()},
                                      **options)


def run_pending(lake: LakeSession, reapply: bool = False) -> dg.ExecuteInProcessResult:
    """Apply everything pending in the insurance raw zone (with `reapply`, also the files
    `lake restore` reverted)."""
    config = {"ops": {"insurance_tables": {"config": {"reapply": True}}}} if reapply else None
    return execute(lake, "apply_insurance", "lake run --reapply" if reapply else "lake run", config=config)


@contextlib.contextmanager
def _quiet_loggers() -> Iterator[None]:
    """Keep Python loggers of Dagster, the engine client and boto off the user's terminal."""
    names = ("dagster", "py4j", "pyspark", "botocore", "boto3", "urllib3", "grpc")
    previous = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for name, level in previous.items():
            logging.getLogger(name).setLevel(level)


def report_run(result: dg.ExecuteInProcessResult) -> int:
    """Print what the run did; return the exit code (EXIT_OK, EXIT_FAILED or EXIT_FILES_REFUSED)."""
    refused: list[str] = []
    for event in result.get_asset_materialization_events():
        materialization = event.materialization
        if materialization.asset_key == dg.AssetKey(TABLE):
            meta = {k: v.value for k, v in materialization.metadata.items()}
            console.print(
                f"insurance: version {meta.get('delta_version_before')} -> {meta.get('delta_version')}, "
                f"rows {meta.get('rows_before')} -> {meta.get('rows_after')} "
                f"(+{meta.get('rows_inserted')} inserted, {meta.get('rows_updated')} updated, "
                f"{meta.get('rows_deleted')} deleted, {meta.get('rows_superseded')} superseded, "
                f"{meta.get('rows_quarantined')} quarantined) in {meta.get('duration_seconds')} s"
            )
            refused += [f["file"] for f in meta.get("source_files") or [] if f.get("status") == REJECTED]
    for file in refused:
        errors.print(f"[red]refused:[/red] {file} (whole file rejected; see `lake status`)")
    if not report_checks(result):
        return EXIT_FAILED
    return EXIT_FILES_REFUSED if refused else EXIT_OK


def report_checks(result: dg.ExecuteInProcessResult) -> bool:
    """Print each check's outcome and any failure; True if the run succeeded and no blocking check failed."""
    checks_ok = True
    for evaluation in result.get_asset_check_evaluations():
        warning = evaluation.severity == dg.AssetCheckSeverity.WARN
        mark = ("[green]passed[/green]" if evaluation.passed
                else "[yellow]warning[/yellow]" if warning else "[red]FAILED[/red]")
        checks_ok &= evaluation.passed or warning
        console.print(f"  check {evaluation.check_name}: {mark}")
    if not result.success:
        for message in failure_messages(result):
            errors.print(f"[red]run failed:[/red] {message}")
    return result.success and checks_ok


def failure_messages(result: dg.ExecuteInProcessResult) -> list[str]:
    """One line per failed step (its error's first line), or the run's own failure message."""
    messages = []
    for event in result.all_events:
        if event.is_step_failure:
            error = event.step_failure_data.error
            cause = error
            while cause.cause is not None:  # the user's exception, not Dagster's wrapper
                cause = cause.cause
            text = (cause.message or error.message or "").strip()
            first = text.splitlines()[0] if text else "failed"
            name, _, rest = first.partition(": ")
            if rest and "." in name and " " not in name:  # "package.module.SomeError: ..." -> "SomeError: ..."
                first = f"{name.rsplit('.', 1)[1]}: {rest}"
            messages.append(f"{event.step_key}: {first}")
    if not messages:
        for event in result.all_events:
            if event.event_type == dg.DagsterEventType.RUN_FAILURE and event.message:
                messages.append(event.message.strip().splitlines()[0])
    return messages or ["the run failed (see the Dagster UI for its event log)"]


@app.command()
@friendly
def run(
    reapply: Annotated[bool, typer.Option("--reapply", help="also apply again the files `lake restore` reverted")]
    = False,
) -> None:
    """Apply everything pending in both domains now, synchronously, without the daemon.

    Exit code 0: all applied and every check passed; 1: a run or a blocking check failed;
    3: the runs succeeded but refused whole files (listed; see `lake status`).
    """
    from lake_assets.cli.backfill import run_tpcds_pending

    with lake_session() as lake:
        code = report_run(run_pending(lake, reapply))
        tpcds_ok = run_tpcds_pending(lake)
    code = code if tpcds_ok or code == EXIT_FAILED else EXIT_FAILED
    if code != EXIT_OK:
        raise typer.Exit(code)


@app.command()
@friendly
def demo(
    data: Annotated[Path, typer.Option(help="folder with fullload/ and cdcload/ samples")] = REPO_ROOT / "data",
    fresh: Annotated[bool, typer.Option(help="first delete this lake's raw and curated data (embedded S3 only)")] = False,
) -> None:
    """The seed's walkthrough (full load, query, CDC batches, query again, history), then the TPC-DS star and a report."""
    with lake_session() as lake:
        if fresh:
            if not lake.storage.embedded:
                raise UsageError("--fresh only works on the embedded S3 server, never on LAKE_S3_ENDPOINT")
            for prefix in ("raw/", "staging/", "curated/"):
                lake.storage.delete_prefix(prefix)
            lake_catalog(lake.storage).drop_namespace(TPCDS_NAMESPACE)  # the Iceberg star lives in the catalog
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
            code = report_run(run_pending(lake))
            console.rule(f"after the {zone} files")
            show_query(lake, SEED_QUERY, Format.table)
            if code != EXIT_OK:
                raise typer.Exit(code)
        console.rule("insurance history")
        show_history(lake, TABLE, Format.table)
        console.rule("insurance_quarantine")
        show_query(lake, "SELECT source_file, line_number, reason, detail, raw_text FROM insurance_quarantine "
                         "ORDER BY source_file, line_number", Format.table)
        demo_star(lake)


#: Scale of the TPC-DS star `lake demo` builds (about 7,200 web_sales rows).
DEMO_SCALE = 0.01
DEMO_REPORT = ("SELECT i_category, i_class, i_item_id, itemrevenue, round(revenueratio, 2) AS revenueratio "
               "FROM tpcds.report_q12 ORDER BY i_category, i_class, i_item_id LIMIT 10")


def demo_star(lake: LakeSession) -> None:
    """The second domain: land TPC-DS at a small scale, load the Iceberg star, print one report."""
    from lake_assets.cli.backfill import run_tpcds_pending
    from lake_assets.tpcds.generate import generate

    console.rule(f"TPC-DS web_sales star on Iceberg (scale {DEMO_SCALE})")
    landed = generate(lake.storage, DEMO_SCALE)
    console.print(f"landed {landed.objects} raw objects under {lake.storage.uri('raw/tpcds/')}")
    if not run_tpcds_pending(lake):
        raise typer.Exit(EXIT_FAILED)
    console.rule("report: TPC-DS query 12 (first rows), from tpcds.report_q12")
    show_query(lake, DEMO_REPORT, Format.table)
