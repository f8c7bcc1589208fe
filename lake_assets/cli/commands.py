"""`lake` commands. Each one reuses the S3 server a running `lake dev` started, or starts
one for its own duration; user mistakes end with a one-line message and exit code 2."""

import contextlib
import datetime as dt
import functools
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import dagster as dg
import typer
from pyspark.errors import PySparkException

from lake_assets.cli.output import Format, console, errors, render
from lake_assets.cli.session import REPO_ROOT, LakeSession, lake_session, prepare_dagster_home
from lake_assets.core.formats.delta import open_table
from lake_assets.insurance.contract import TABLE
from lake_assets.insurance.pipeline import RAW_CDC, RAW_FULLLOAD, raw_objects
from lake_assets.core.ledger import Ledger
from lake_assets.core.errors import LakeError, UsageError
from lake_assets.resources.embedded_s3 import embedded_s3
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings, s3_credentials
from lake_assets.core.tables import TABLES, table

app = typer.Typer(help="lake: a Dagster-orchestrated lakehouse on Delta Lake.", no_args_is_help=True,
                  pretty_exceptions_enable=False)

SEED_QUERY = ("SELECT * FROM insurance WHERE policy_id IN (100462,100463,100475,110001,110002) "
              "ORDER BY policy_id")
ZONES = {"fullload": RAW_FULLLOAD, "cdcload": RAW_CDC}


def friendly(command):
    """Turn expected failures into a clear message and a non-zero exit code."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except FileNotFoundError as error:
            errors.print(f"[red]error:[/red] {error}")
            raise typer.Exit(2) from None
        except LakeError as error:
            errors.print(f"[red]error:[/red] {_first_line(error)}")
            raise typer.Exit(error.exit_code) from None
        except PySparkException as error:
            errors.print(f"[red]error:[/red] {_first_line(error)}")
            raise typer.Exit(1) from None
    return wrapper


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# --- lake put / status ------------------------------------------------------------------

@app.command()
@friendly
def put(
    file: Annotated[Path, typer.Argument(help="local CSV file to upload")],
    to: Annotated[str, typer.Option("--to", help="raw zone: fullload or cdcload")],
) -> None:
    """Upload FILE into the raw zone under its own name (the same name again re-delivers it)."""
    if to not in ZONES:
        raise UsageError(f"--to must be one of {', '.join(ZONES)}, not {to!r}")
    if not file.is_file():
        raise FileNotFoundError(f"no such file: {file}")
    with lake_session() as lake:
        key = ZONES[to] + file.name
        etag = lake.storage.put_bytes(key, file.read_bytes())
        console.print(f"put {lake.storage.uri(key)} (etag {etag})")


@app.command()
@friendly
def status(fmt: Annotated[Format, typer.Option("--format")] = Format.table) -> None:
    """What is pending, applied and rejected in the raw zone, per file."""
    with lake_session() as lake:
        latest = {}
        for entry in Ledger(lake.storage).entries(TABLE).to_pylist():
            latest[(entry["source_file"], entry["source_etag"])] = entry
        rows = []
        for obj in raw_objects(lake.storage):
            entry = latest.get((obj.key, obj.etag))
            if entry is None:
                redelivered = any(key == obj.key for key, _ in latest)
                rows.append((obj.key, obj.size, "pending (re-delivered)" if redelivered else "pending",
                             None, None, None, None, None))
            else:
                rows.append((obj.key, obj.size, entry["status"], entry["table_version"], entry["rows_in_file"],
                             entry["rows_applied"], entry["rows_superseded"], entry["rows_quarantined"]))
        render(["file", "bytes", "status", "version", "rows", "applied", "superseded", "quarantined"],
               rows, fmt, title=f"raw zone of s3://{lake.storage.bucket}")


# --- lake run / demo --------------------------------------------------------------------

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
    checks_ok = True
    for evaluation in result.get_asset_check_evaluations():
        mark = "[green]passed[/green]" if evaluation.passed else "[red]FAILED[/red]"
        checks_ok &= evaluation.passed
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
    with lake_session() as lake:
        if not report_run(run_pending(lake)):
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


# --- lake query / history ---------------------------------------------------------------

def tables_in(sql: str) -> list[str]:
    return [name for name in TABLES if re.search(rf"(?<![\w.`]){re.escape(name)}(?![\w`])", sql, re.IGNORECASE)]


def show_query(lake: LakeSession, sql: str, fmt: Format, version: int | None = None, as_of: str | None = None) -> None:
    names = tables_in(sql)
    if (version is not None or as_of) and len(names) != 1:
        raise UsageError("--version/--as-of need a query that reads exactly one table; it reads "
                         + (", ".join(names) or "none"))
    spark = lake.spark()
    for name in names:
        entry = table(name)
        if open_table(lake.storage, entry) is None:
            raise UsageError(f"table {name} does not exist yet (nothing applied); see `lake status`")
        reader = spark.read.format(entry.format)
        if version is not None:
            reader = reader.option("versionAsOf", version)
        if as_of:
            reader = reader.option("timestampAsOf", as_of)
        reader.load(entry.uri(lake.storage)).createOrReplaceTempView(name)
    frame = spark.sql(sql)
    rows = [tuple(row) for row in frame.collect()]
    render(frame.columns, rows, fmt)


@app.command()
@friendly
def query(
    sql: Annotated[str, typer.Argument(help="Spark SQL over the lake's tables by name")],
    fmt: Annotated[Format, typer.Option("--format")] = Format.table,
    version: Annotated[int | None, typer.Option("--version", help="read the table as of this Delta version")] = None,
    as_of: Annotated[str | None, typer.Option("--as-of", help="read the table as of this timestamp")] = None,
) -> None:
    """Run SQL over the lake's tables (insurance, insurance_quarantine, lake_ledger)."""
    with lake_session() as lake:
        show_query(lake, sql, fmt, version, as_of)


def show_history(lake: LakeSession, name: str, fmt: Format) -> None:
    delta = open_table(lake.storage, table(name))
    if delta is None:
        raise UsageError(f"table {name} does not exist yet (nothing applied); see `lake status`")
    rows = []
    for entry in delta.history():
        metrics = entry.get("operationMetrics") or {}
        rows.append((
            entry["version"],
            _timestamp(entry.get("timestamp")),
            entry.get("operation"),
            metrics.get("numTargetRowsInserted", metrics.get("numOutputRows")),
            metrics.get("numTargetRowsUpdated"),
            metrics.get("numTargetRowsDeleted"),
            metrics.get("numAddedFiles", metrics.get("numFilesAdded")),
            metrics.get("numRemovedFiles", metrics.get("numFilesRemoved")),
        ))
    render(["version", "timestamp", "operation", "rows_inserted_or_written", "rows_updated", "rows_deleted",
            "files_added", "files_removed"], rows, fmt)


def _timestamp(millis: int | None) -> str | None:
    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).isoformat() if millis else None


@app.command()
@friendly
def history(
    name: Annotated[str, typer.Argument(metavar="TABLE", help="table name, e.g. insurance")],
    fmt: Annotated[Format, typer.Option("--format")] = Format.table,
) -> None:
    """A table's Delta history, newest first (first column the version)."""
    with lake_session() as lake:
        show_history(lake, name, fmt)


# --- lake dev ---------------------------------------------------------------------------

@app.command()
@friendly
def dev(port: Annotated[int | None, typer.Option(help="webserver port (default LAKE_WEB_PORT or 3000)")] = None) -> None:
    """Dagster webserver and daemon on 127.0.0.1 with the sensors running, plus the embedded S3."""
    settings = LakeSettings.from_env()
    dagster_home = prepare_dagster_home(settings)
    storage = LakeStorage.from_settings(settings)
    web_port = port or settings.web_port
    with (embedded_s3(settings.home, settings.s3_port, *s3_credentials(True)) if storage.embedded
          else _external(storage.endpoint)) as endpoint:
        storage.with_endpoint(endpoint).ensure_bucket()
        console.print(f"S3 {endpoint} (bucket {storage.bucket}); Dagster UI http://127.0.0.1:{web_port}; "
                      f"DAGSTER_HOME {dagster_home}. Ctrl-C stops everything.")
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("dagster")), "dev", "-w", str(REPO_ROOT / "workspace.yaml"),
             "-h", "127.0.0.1", "-p", str(web_port)],
            cwd=REPO_ROOT, env=os.environ.copy(), start_new_session=True,
        )
        try:
            process.wait()
        except KeyboardInterrupt:
            console.print("stopping Dagster ...")
        finally:
            _stop_group(process)


def _external(endpoint: str) -> contextlib.AbstractContextManager[str]:
    return contextlib.nullcontext(endpoint)


def _stop_group(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

