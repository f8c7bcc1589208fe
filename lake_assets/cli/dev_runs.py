"""`lake dev`'s terminal: one line per finished run, read from the Dagster instance.

Dagster's daemon logs every sensor tick at INFO (about 70 lines a minute here); `lake dev`
starts it at WARNING and prints instead, for each run that ends, a line like

    12:03:04 run 1a2b3c4d apply_insurance SUCCESS [refused, quarantined] 3.1 s -> insurance: files 1 applied,
        1 refused, 0 held; rows 2 applied, 0 superseded, 1 quarantined (raw_insurance_sensor, 2 files)

(one line): the files and rows come from the tables' materialization metadata (core/run_outcome.py),
and a run that refused files, quarantined rows or held a full load is marked so in brackets after
its status. A failed run's line is followed by its first error. The runs come from the instance's run
storage and event log through the public `DagsterInstance` API (no log text is parsed).
"""

import datetime as dt
from collections.abc import Iterator

import dagster as dg

from lake_assets.core.run_outcome import RunOutcome
from lake_assets.declared.sensors import OBJECTS_TAG

FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
#: Dagster's tags naming what launched a run (public keys, shown as "Launched by" in the UI).
LAUNCHERS = ("dagster/sensor_name", "dagster/schedule_name", "lake/launched_by")
#: Run storage timestamps and this process's clock may differ by a little; look back this far.
OVERLAP = dt.timedelta(seconds=5)
MAX_ASSETS_NAMED = 3


class RunReporter:
    """Yields a line for every run that finished since the reporter was made, each run once."""

    def __init__(self, instance: dg.DagsterInstance, since: dt.datetime | None = None) -> None:
        self._instance = instance
        self._since = since or dt.datetime.now(dt.timezone.utc)
        self._reported: set[str] = set()

    def new_lines(self) -> Iterator[str]:
        records = self._instance.get_run_records(
            filters=dg.RunsFilter(statuses=FINISHED, updated_after=self._since - OVERLAP),
            order_by="update_timestamp", ascending=True)
        for record in records:
            if record.dagster_run.run_id in self._reported:
                continue
            self._reported.add(record.dagster_run.run_id)
            yield from self._describe(record)

    def _describe(self, record: dg.RunRecord) -> Iterator[str]:
        run = record.dagster_run
        ended = dt.datetime.fromtimestamp(record.end_time or record.update_timestamp.timestamp())
        seconds = (record.end_time - record.start_time) if record.end_time and record.start_time else None
        assets, outcome = self._materialized(run.run_id)
        line = f"{ended:%H:%M:%S} run {run.run_id[:8]} {_job(run)} {run.status.value}"
        if outcome is not None and outcome.marks:
            line += f" [{', '.join(outcome.marks)}]"
        if seconds is not None:
            line += f" {seconds:.1f} s"
        if assets:
            more = f" +{len(assets) - MAX_ASSETS_NAMED}" if len(assets) > MAX_ASSETS_NAMED else ""
            line += f" -> {', '.join(assets[:MAX_ASSETS_NAMED])}{more}"
        if outcome is not None:
            line += f": {outcome.describe()}"
        origin = [run.tags[key] for key in LAUNCHERS if key in run.tags]
        if OBJECTS_TAG in run.tags:
            origin.append(f"{run.tags[OBJECTS_TAG]} file{'s' if run.tags[OBJECTS_TAG] != '1' else ''}")
        if origin:
            line += f" ({', '.join(origin)})"
        yield line
        if run.status is dg.DagsterRunStatus.FAILURE:
            yield f"  error: {self._first_error(run.run_id)}"

    def _materialized(self, run_id: str) -> tuple[list[str], RunOutcome | None]:
        """The tables (asset keys) the run materialized, in order, each once; and what it did with
        its raw objects (summed over its declared tables; None when none says)."""
        connection = self._instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
        materializations = [r.event_log_entry.asset_materialization for r in connection.records
                            if r.event_log_entry.asset_materialization is not None]
        # one outcome per table: a run for a range of partitions materializes its table once per partition
        # (and a partition's own materialization carries none)
        each: dict[dg.AssetKey, RunOutcome] = {}
        for materialization in materializations:
            outcome = RunOutcome.from_metadata(materialization.metadata)
            if outcome is not None:
                each.setdefault(materialization.asset_key, outcome)
        outcomes = list(each.values())
        total = sum(outcomes[1:], outcomes[0]) if outcomes else None
        return list(dict.fromkeys(".".join(m.asset_key.path) for m in materializations)), total

    def _first_error(self, run_id: str) -> str:
        """The first step's error message, or the run's failure message, on one line."""
        connection = self._instance.get_records_for_run(
            run_id, of_type={dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE})
        for record in connection.records:
            event = record.event_log_entry.dagster_event
            if event is None:
                continue
            if event.is_step_failure and event.step_failure_data.error is not None:
                error = event.step_failure_data.error
                while error.cause is not None:  # Dagster wraps the asset's own exception
                    error = error.cause
                return _one_line(error.message)
            if event.message:
                return _one_line(event.message)
        return "see the run's page in the Dagster UI"


def _job(run: dg.DagsterRun) -> str:
    """The job's name; runs of Dagster's implicit asset jobs (the automation sensor's) say "assets"."""
    return "assets" if run.job_name.startswith("__") else run.job_name


def _one_line(text: str) -> str:
    return " ".join(text.strip().splitlines()[:1]) or "(no message)"
