"""The run coordinator dagster.yaml names: Dagster's run queue, with every run tagged by its table.

A job of the lake carries `lake/table` (runs.TABLE_TAG), which dagster.yaml's
`tag_concurrency_limits` uses to run one writer per table at a time and the UI's runs list
shows. A run of Dagster's implicit asset job (launched from the asset graph's Materialize
button, or by the automation sensor that refreshes the reports) has no job tags; this coordinator
adds the tag when the run is submitted, from the assets it materializes, before the queue reads
it. Adding tags at submission is the extension Dagster documents for a run coordinator ("run
attribution").

With `start_unqueued_runs: true` (the embedded default's dagster.yaml: one machine, every
submitter sharing its instance directory), a run a sensor or a schedule submits (in the daemon's
process, where the run launcher keeps its next run process waiting) that nothing is ahead of is
launched at once instead of waiting for the queue daemon's next pass (`dequeue_interval_seconds`,
then the launch: ~1 s of a CDC file's way to its table under `lake dev`). "Nothing ahead": no
run queued, fewer than `max_concurrent_runs` in progress, and no in-progress run holding a tag
limit this run needs (Dagster's own counter of `tag_concurrency_limits`), under a lock every
submission of the instance takes, so two submissions cannot both pass the check; a run that
could not start now is queued as before.
"""

import fcntl
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Self

import dagster as dg
from dagster._core.storage.dagster_run import IN_PROGRESS_RUN_STATUSES
from dagster._core.storage.tags import SCHEDULE_NAME_TAG, SENSOR_NAME_TAG
from dagster._serdes import ConfigurableClassData
from dagster._utils.tags import TagConcurrencyLimitsCounter

from lake_assets.runs import TABLE_TAG

#: Under the instance's directory: held by a submission from its check to its launch or enqueue.
SUBMIT_LOCK = "lake-submit.lock"
#: The coordinator's own setting, besides Dagster's queue settings.
START_UNQUEUED = "start_unqueued_runs"

#: The first path component of the TPC-DS star's assets (and its reports'); its runs' table tag.
TPCDS = "tpcds"


def written_table(keys: Iterable[dg.AssetKey]) -> str | None:
    """The one lake table whose assets `keys` are (a declared table or the TPC-DS star), or None
    when they are of none (the ledger, a raw source) or of more than one."""
    from lake_assets.core.registry import declarations
    from lake_assets.core.tables import table_set

    owners = {tuple(kept.asset_path): declaration.table_name for declaration in declarations()
              for kept in table_set(declaration).kept(declaration)}
    tables = {TPCDS if key.path[0] == TPCDS else owners.get(tuple(key.path)) for key in keys}
    return tables.pop() if len(tables) == 1 else None


def _from_daemon(run: dg.DagsterRun) -> bool:
    """Submitted by a sensor or a schedule: a run of the UI's is left to the queue, so the webserver
    starts no run processes of its own."""
    return SENSOR_NAME_TAG in run.tags or SCHEDULE_NAME_TAG in run.tags


class TableTaggingRunCoordinator(dg.QueuedRunCoordinator):
    """Dagster's queued run coordinator; a submitted run without `lake/table` gets the one its
    assets name, and (if so configured) a run nothing is ahead of starts without waiting for the queue."""

    def __init__(self, *args: Any, start_unqueued_runs: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._start_unqueued = start_unqueued_runs

    @classmethod
    def config_type(cls) -> dict:
        queue = super().config_type()
        assert isinstance(queue, dict), "Dagster's queued coordinator declares its config as fields"
        return {**queue, START_UNQUEUED: dg.Field(
            bool, is_required=False, default_value=False,
            description="Launch a submitted run at once when no run is queued and the limits allow it (the "
                        "lock this takes is a file in the instance's directory: only where every submitter "
                        "shares that directory).")}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]) -> Self:
        coordinator = super().from_config_value(inst_data, {k: v for k, v in config_value.items() if k != START_UNQUEUED})
        coordinator._start_unqueued = bool(config_value.get(START_UNQUEUED, False))
        return coordinator

    def submit_run(self, context: dg.SubmitRunContext) -> dg.DagsterRun:
        run = context.dagster_run
        keys = set(run.asset_selection or ()) | {check.asset_key for check in run.asset_check_selection or ()}
        if TABLE_TAG not in run.tags and keys:
            table = written_table(keys)
            if table is not None:
                self._instance.add_run_tags(run.run_id, {TABLE_TAG: table})
                run = run.with_tags({**run.tags, TABLE_TAG: table})
        if not self._start_unqueued:
            return super().submit_run(context)
        with self._submitting():
            if run.status == dg.DagsterRunStatus.NOT_STARTED and _from_daemon(run) and self._can_start_now(run):
                return self._instance.launch_run(run.run_id, context.workspace)
            return super().submit_run(context)

    def _can_start_now(self, run: dg.DagsterRun) -> bool:
        instance = self._instance
        if instance.get_runs_count(dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED])):
            return False
        config = self.get_run_queue_config()
        if config.should_block_op_concurrency_limited_runs and instance.event_log_storage.get_concurrency_keys():
            return False  # pools: the queue daemon's to weigh
        in_progress = instance.get_runs(dg.RunsFilter(statuses=IN_PROGRESS_RUN_STATUSES))
        if 0 <= config.max_concurrent_runs <= len(in_progress):
            return False
        return not TagConcurrencyLimitsCounter(list(config.tag_concurrency_limits), list(in_progress)).is_blocked(run)

    @contextmanager
    def _submitting(self) -> Iterator[None]:
        """The instance's submission lock (a file lock: the daemon, the webserver and `lake` submit)."""
        path = os.path.join(self._instance.root_directory, SUBMIT_LOCK)
        with open(path, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
