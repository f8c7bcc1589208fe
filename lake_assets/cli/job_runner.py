"""Run the code location's jobs in this process and report what they did (Dagster, imported
only by the commands that run jobs)."""

import contextlib
import functools
import logging
import os
import signal
import sys
import threading
import uuid
import warnings
from collections.abc import Iterator

import dagster as dg

from lake_assets.cli import fates
from lake_assets.cli.app import EXIT_FAILED, EXIT_FILES_REFUSED, EXIT_OK
from lake_assets.cli.output import console, errors
from lake_assets.cli.session import LakeSession
from lake_assets.core.ledger import REJECTED
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.registry import declaration, declarations
from lake_assets.core.tables import table_set
from lake_assets.declared.jobs import job_name
from lake_assets.runs import location_tags, process_tags, reap_dead_runs
from lake_assets.settings import LakeSettings
from lake_assets.core.progress import Progress


def execute(lake: LakeSession, job_name: str, launched_by: str, tags: dict[str, str] | None = None,
            config: dict | None = None, **options: object) -> dg.ExecuteInProcessResult:
    """Run a job of the code location in this process (same assets and checks as the daemon).

    Dagster's and the engine's own logs go to the run's event log (see the Dagster UI), not to
    the terminal: the command prints its own summary and one line per failure. The run is
    tagged with this process, so `reap_dead_runs` can fail it if the command is killed.
    `config` is the run config of the job's ops (`{"ops": {...}}`). Ctrl-C or SIGTERM during
    a step ends the step (Dagster turns it into a step failure) and then the command: it
    raises KeyboardInterrupt, so no further run starts.
    """
    quiet = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    run_id = str(uuid.uuid4())
    from lake_assets.cli.progress import step_progress

    with _quiet_loggers(), _interrupts_kept(), step_progress() as progress, \
            showing_steps(lake.instance(), run_id, job_name, progress):
        job = _definitions(lake.settings).resolve_job_def(job_name)
        reap_dead_runs(lake.instance())  # runs killed earlier must not hold the table's slot
        result = job.execute_in_process(run_config={**quiet, **(config or {})}, instance=lake.instance(),
                                        raise_on_error=False, run_id=run_id, **options,
                                        tags={**(tags or {}), "lake/launched_by": launched_by, **process_tags(),
                                              **location_tags()})
    if _interrupted(result):
        raise KeyboardInterrupt
    return result


#: How long after a lost interrupt it is sent again (long enough for the hook to have returned).
RESEND_SECONDS = 0.05


@contextlib.contextmanager
def _interrupts_kept() -> Iterator[None]:
    """Deliver again a Ctrl-C or SIGTERM whose exception was lost.

    During a step Dagster turns the signal into an exception raised wherever the main thread
    is. When that is a garbage-collection callback (SQLAlchemy's, which Dagster's event writes
    leave behind often), Python reports the exception as unraisable and the run goes on to
    its end, as if the signal never came. This hook sends SIGINT to the process again (Dagster
    handles SIGTERM as SIGINT) from another thread a moment later: sent from the hook itself, the
    handler ran inside the hook, and its exception was lost the same way (seen in CI).
    """
    previous = sys.unraisablehook

    def hook(unraisable: "sys.UnraisableHookArgs") -> None:
        if isinstance(unraisable.exc_value, (KeyboardInterrupt, dg.DagsterExecutionInterruptedError)):
            threading.Timer(RESEND_SECONDS, os.kill, (os.getpid(), signal.SIGINT)).start()
        else:
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def _interrupted(result: dg.ExecuteInProcessResult) -> bool:
    """True if a step of the run failed because the command was told to stop."""
    return any(event.is_step_failure and event.step_failure_data.error is not None
               and event.step_failure_data.error.cls_name == "DagsterExecutionInterruptedError"
               for event in result.all_events)


@functools.lru_cache(maxsize=2)
def _definitions(settings: LakeSettings) -> dg.Definitions:
    """The code location's definitions, built once per command (`lake run` runs three jobs)."""
    from lake_assets.definitions import build_definitions

    return build_definitions(settings)


#: The events that say which step of a run is executing.
_STEP_EVENTS = {dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}


@contextlib.contextmanager
def showing_steps(instance: dg.DagsterInstance, run_id: str, job_name: str, progress: Progress,
                  poll_seconds: float = 0.5) -> Iterator[None]:
    """While run `run_id` executes, report the step it is in (read from its event log)."""
    from sqlalchemy.exc import OperationalError

    stop = threading.Event()
    progress.step(f"{job_name}: starting the run")

    def follow() -> None:
        cursor, done = None, 0
        while not stop.wait(poll_seconds):
            try:
                found = instance.get_records_for_run(run_id, cursor=cursor, of_type=_STEP_EVENTS)
            except OperationalError:  # the run is writing (sqlite): next time
                continue
            cursor = found.cursor
            for record in found.records:
                event = record.event_log_entry.dagster_event
                if event is not None and event.event_type == dg.DagsterEventType.STEP_START:
                    progress.step(f"{job_name}: {event.step_key} ({done} step(s) done)")
                else:
                    done += 1

    watcher = threading.Thread(target=follow, name="lake-run-steps", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()


def run_pending(lake: LakeSession, reapply: bool = False,
                table: TableDeclaration | None = None) -> dg.ExecuteInProcessResult:
    """Apply everything pending in a declared table's raw zone (default: insurance's; with
    `reapply`, also the files `lake restore` reverted), through its job."""
    table = table or declaration("insurance")
    config = {"ops": {f"{table.name}_tables": {"config": {"reapply": True}}}} if reapply else None
    return execute(lake, job_name(table), "lake run --reapply" if reapply else "lake run", config=config)


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


def report_run(result: dg.ExecuteInProcessResult, list_refused: bool = True) -> int:
    """Print what the run did; return the exit code (EXIT_OK, EXIT_FAILED or EXIT_FILES_REFUSED).
    `list_refused=False` leaves the refused files to the caller (`lake run` reports every fate)."""
    refused: list[str] = []
    told: set[str] = set()
    # a declared table's asset is its registry name's path (`shop/orders`); the line names it as users do (`orders`)
    declared = {tuple(table_set(d).table.asset_path): d.name for d in declarations()}
    for event in result.get_asset_materialization_events():
        materialization = event.materialization
        meta = {k: v.value for k, v in materialization.metadata.items()}
        table = declared.get(tuple(materialization.asset_key.path))
        # once per table: a run of partitions materializes it once per partition, and a partition
        # loaded beside has a materialization of its own, without the table's figures
        if table is not None and table not in told and "rows_after" in meta:
            told.add(table)
            version = "snapshot_id" if "snapshot_id" in meta else "delta_version"  # Iceberg or Delta
            change = version_change(meta.get(f"{version}_before"), meta.get(version),
                                    "snapshot" if version == "snapshot_id" else "version")
            console.print(
                f"{table}: {change}, "
                f"rows {meta.get('rows_before')} -> {meta.get('rows_after')} "
                f"(+{meta.get('rows_inserted')} inserted, {meta.get('rows_updated')} updated, "
                f"{meta.get('rows_deleted')} deleted, {meta.get('rows_superseded')} superseded, "
                f"{meta.get('rows_quarantined')} quarantined) in {meta.get('duration_seconds')} s"
            )
            refused += [f["file"] for f in meta.get("source_files") or [] if f.get("status") == REJECTED]
    for file in refused if list_refused else ():
        errors.print(f"[red]refused:[/red] {file} (whole file rejected; see `lake status`)")
    if not report_checks(result):
        return EXIT_FAILED
    return EXIT_FILES_REFUSED if refused else EXIT_OK


def version_change(before: int | None, after: int | None, word: str = "version") -> str:
    """What a run did to the table's version (an Iceberg table's: `snapshot`), in words (the run's
    metadata says -1 for no table)."""
    if after is None or after < 0:
        return "no table yet"
    if before is None or before < 0:
        return f"created at {word} {after}"
    if after == before:
        return f"{word} {after} (unchanged)"
    return f"{word} {before} -> {after}"


def describe_run(lake: LakeSession, run_id: str) -> str:
    """Another run, for a message: its id's first characters and what launched it."""
    run = lake.instance().get_run_by_id(run_id)
    tags = run.tags if run is not None else {}
    sensor, schedule = tags.get("dagster/sensor_name"), tags.get("dagster/schedule_name")
    launched = (f"sensor {sensor}" if sensor else f"schedule {schedule}" if schedule
                else tags.get("lake/launched_by"))
    return f"run {run_id[:8]}" + (f", launched by {launched}" if launched else "")


def apply_everything(lake: LakeSession, snapshot: list[fates.Pending], reapply: bool = False) -> int:
    """`lake run` after its snapshot of pending objects (fates.pending_snapshot): one run per
    domain, then the fate of every object of the snapshot, whoever applied it. Returns the
    exit code (fates.exit_code)."""
    from lake_assets.cli.tpcds_runs import run_tpcds_pending  # it imports this module

    waiting = {item.table_name for item in snapshot} | fates.stopped_runs(lake.storage)
    declared = []
    for table in declarations():
        if table.table_name in waiting:
            declared.append(run_pending(lake, reapply, table))
        else:  # no run: nothing to apply, no stopped run to finish
            console.print(f"{table.name}: nothing pending")
    declared_ok = all([report_run(result, list_refused=False) != EXIT_FAILED for result in declared])
    tpcds = run_tpcds_pending(lake, reapply)
    found = fates.outcomes(lake.storage, snapshot, {*(r.run_id for r in declared), *tpcds.run_ids})
    fates.report(found, lambda run_id: describe_run(lake, run_id))
    return fates.exit_code(found, declared_ok and tpcds.ok)


def report_checks(result: dg.ExecuteInProcessResult) -> bool:
    """Print each check's outcome and any failure; True if the run succeeded and no blocking check failed."""
    checks_ok = True
    for evaluation in result.get_asset_check_evaluations():
        warning = evaluation.severity == dg.AssetCheckSeverity.WARN
        mark = ("[green]passed[/green]" if evaluation.passed
                else "[yellow]warning[/yellow]" if warning else "[red]FAILED[/red]")
        checks_ok &= evaluation.passed or warning
        console.print(f"  check {evaluation.asset_key.to_user_string()}: {evaluation.check_name}: {mark}")
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
