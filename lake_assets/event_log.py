"""The embedded instance's event log: Dagster's sqlite storage, writing a range run's events at once.

A run over a range of days materializes one partition per day, and Dagster logs one
`ASSET_MATERIALIZATION` event per partition (1,823 for a first TPC-DS load at any scale).
Dagster's sqlite storage writes each event alone: a new SQLAlchemy engine per connection,
four connections per event, every statement compiled again, about 8 ms an event on 2 cores,
so ~15 s of every first load went to the event log. Dagster batches those events
(`DAGSTER_EVENT_BATCH_SIZE`, set by the lake for its processes: `cli/session.py`) and hands
each batch to `EventLogStorage.store_event_batch`, which only its Postgres storage
implements; sqlite inherits a loop over `store_event`. This class implements it for sqlite
the way the Postgres storage does: the batch's rows in one statement per shard, the
events' tags in one, each asset's latest entry from its last event. Every other event, and
any batch it does not recognise, goes through Dagster's own `store_event`.

A run executed in process also plans each of its checks for every partition of the run
(one `asset_check_executions` row per day, for every check of the run); Dagster's storage
serializes the whole event again for each of those rows (~4 s for a first TPC-DS load's
11 checks x 1,827 days). Here the rows are the same and the event is serialized once.

A run of a declared table that loads many partitions outside its own (the sensor's, `lake
run`'s: declared/partitions.py) gives each partition a materialization of its own;
`context.log_event` writes each alone (~10 ms an event: 10 s for a run that loads 1,000
partitions), so `log_asset_events` hands them over as one batch, as Dagster does a range run's.

It is the lake's one seam into Dagster's internals (the class, the helpers it calls and the
batch's event constructors are not public API; `dagster` is pinned exactly):
`lake_assets_tests/test_event_log.py` runs a range run with a check through it and through
Dagster's own storage and requires the same materializations, partitions, latest event and
check executions, that Dagster still hands the run's materializations over as one batch, and
that `log_asset_events`' events are stored as one batch and read back as logged ones are.
"""

import os
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg
from dagster._core.events import DagsterEvent, DagsterEventBatchMetadata, generate_event_batch_id
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from dagster._core.storage.event_log.schema import AssetCheckExecutionsTable, SqlEventLogStorageTable
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

#: The event types a batch may hold (Dagster batches the asset events of one step output).
BATCHED = frozenset({dg.DagsterEventType.ASSET_MATERIALIZATION, dg.DagsterEventType.ASSET_OBSERVATION})


class BatchingSqliteEventLogStorage(SqliteEventLogStorage):
    """`SqliteEventLogStorage` whose `store_event_batch` writes a batch in one transaction per shard.

    Configured like `storage: sqlite:` (its `base_dir` is the instance's storage root; the event
    log is in `history/runs/` below it, where Dagster's sqlite storage keeps it)."""

    def __init__(self, base_dir: str, inst_data: Any = None) -> None:
        super().__init__(os.path.join(base_dir, "history", "runs"), inst_data=inst_data)

    @classmethod
    def config_type(cls) -> dict:
        return {"base_dir": dg.StringSource}

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Mapping[str, Any]) -> "BatchingSqliteEventLogStorage":
        return cls(inst_data=inst_data, base_dir=config_value["base_dir"])

    def store_event_batch(self, events: Sequence[dg.EventLogEntry]) -> None:
        if not _one_kind_of_one_run(events):
            super().store_event_batch(events)
            return
        rows = [self._event_to_row(event) for event in events]
        with self.run_connection(events[0].run_id) as conn:
            conn.execute(SqlEventLogStorageTable.insert(), rows)
        # mirrored in the cross-run index shard, as store_event does; the tags name the index's ids
        with self.index_transaction() as conn:
            inserted = conn.execute(SqlEventLogStorageTable.insert().returning(
                SqlEventLogStorageTable.c.id, sort_by_parameter_order=True), rows)
            event_ids = [int(row[0]) for row in inserted]
            self._store_asset_event_tags(conn, events, event_ids)
            latest = {event.get_dagster_event().asset_key: (event, event_id) for event, event_id in zip(events, event_ids)}
            for event, event_id in latest.values():  # each asset's latest event, as one store_event would leave it
                self._store_asset_event(conn, event, event_id)

    def _store_asset_check_evaluation_planned(self, event: dg.EventLogEntry, event_id: int | None) -> None:
        """Dagster's rows (one per partition of the run), the event serialized once, not once per row."""
        planned: Any = event.get_dagster_event().event_specific_data  # AssetCheckEvaluationPlanned
        if planned.partitions_subset is None:
            super()._store_asset_check_evaluation_planned(event, event_id)
            return
        serialized, timestamp = dg.serialize_value(event), self._event_insert_timestamp(event)
        rows = [dict(asset_key=planned.asset_key.to_string(), check_name=planned.check_name, partition=partition,
                     run_id=event.run_id, execution_status=AssetCheckExecutionRecordStatus.PLANNED.value,
                     evaluation_event=serialized, evaluation_event_timestamp=timestamp,
                     evaluation_event_storage_id=event_id)
                for partition in planned.partitions_subset.get_partition_keys()]
        with self.index_connection() as conn:
            conn.execute(AssetCheckExecutionsTable.insert(), rows)


def _one_kind_of_one_run(events: Sequence[dg.EventLogEntry]) -> bool:
    """Whether `events` are all materializations (or all observations) of assets, from one run."""
    if len(events) < 2 or len({event.run_id for event in events}) != 1:
        return False
    kinds = {event.dagster_event_type for event in events}
    return len(kinds) == 1 and kinds <= BATCHED and all(
        event.dagster_event is not None and event.dagster_event.asset_key is not None for event in events)


def log_asset_events(context: dg.AssetExecutionContext,
                     events: Sequence[dg.AssetMaterialization | dg.AssetObservation]) -> None:
    """Log `events` from an asset's step as ONE batch of the event log (each alone with fewer than two)."""
    if len(events) < 2:
        for event in events:
            context.log_event(event)
        return
    step = context.op_execution_context._step_execution_context  # private: Dagster batches no logged event
    batch = generate_event_batch_id()
    for index, event in enumerate(events):  # a DagsterEvent made from a step is logged as it is made
        metadata = DagsterEventBatchMetadata(batch, index == len(events) - 1)
        if isinstance(event, dg.AssetMaterialization):
            DagsterEvent.asset_materialization(step, event, metadata)
        else:
            DagsterEvent.asset_observation(step, event, metadata)
