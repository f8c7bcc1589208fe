"""The lake's event log (lake_assets/event_log.py) against Dagster's own sqlite storage.

A range run materializes one partition per day; Dagster hands those events to the storage as
one batch, which the lake's storage writes at once, and plans its check for every day, rows the
lake's storage writes with the event serialized once. The run must leave the same record through
either storage (its materializations, the partitions materialized, the asset's latest event, the
check executions), and Dagster must still hand the events over as one batch (else the storage is
bypassed).
"""

import os
from pathlib import Path

import dagster as dg
import pytest

from lake_assets.cli.session import DAGSTER_ENV
from lake_assets.event_log import BatchingSqliteEventLogStorage, log_asset_events

REPO = Path(__file__).resolve().parents[1]
DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-03-01")  # 60 days
KEY = dg.AssetKey(["days"])


@dg.asset(key=KEY, partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.single_run())
def days(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"rows": len(context.partition_keys), "first": context.partition_keys[0]})


@dg.asset_check(asset=days, blocking=True)
def days_have_rows() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True)


CHECK = dg.AssetCheckKey(KEY, "days_have_rows")
JOB = dg.Definitions(assets=[days], asset_checks=[days_have_rows], jobs=[
    dg.define_asset_job("days_job", selection=[days], executor_def=dg.in_process_executor)]).resolve_job_def("days_job")

DAGSTER_SQLITE = "storage:\n  sqlite:\n    base_dir:\n      env: DAGSTER_HOME\ntelemetry:\n  enabled: false\n"


def _run_every_day(home: Path, instance_yaml: str, monkeypatch: pytest.MonkeyPatch) -> tuple[dg.DagsterInstance, str]:
    home.mkdir()
    (home / "dagster.yaml").write_text(instance_yaml)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    for name, value in DAGSTER_ENV.items():
        monkeypatch.setenv(name, value)
    instance = dg.DagsterInstance.get()
    keys = DAYS.get_partition_keys()
    result = JOB.execute_in_process(instance=instance, tags={
        "dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]})
    assert result.success
    return instance, result.run_id


def _record(instance: dg.DagsterInstance, run_id: str) -> dict:
    """What a run left in the event log, read through the instance and its event log's API."""
    records = instance.fetch_materializations(KEY, limit=1000).records
    latest = instance.get_latest_materialization_event(KEY)
    one_day = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=KEY, asset_partitions=["2024-02-10"]),
                                              limit=10).records
    [asset] = instance.get_asset_records([KEY])
    checks = instance.event_log_storage.get_asset_check_execution_history(CHECK, limit=1000)
    return {
        "materialized": instance.get_materialized_partitions(KEY),
        "per_record": sorted((r.partition_key, r.run_id, dict(r.asset_materialization.metadata)) for r in records),
        "in_run": len(instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION,
                                                   limit=1000).records),
        "latest_partition": latest.dagster_event.partition if latest else None,
        "one_day": [(r.partition_key, r.run_id) for r in one_day],
        "asset_last_run": asset.asset_entry.last_run_id,
        "asset_last_partition": asset.asset_entry.last_materialization.dagster_event.partition,
        # a range run executed in process plans its checks for every day of the run (Dagster's choice)
        "checks": sorted(((c.partition, c.status.value, c.run_id == run_id,
                           c.event.dagster_event_type.value if c.event else None) for c in checks), key=repr),
    }


@pytest.mark.integration  # Dagster's compute-log capture of a run on a real instance starts a `tail` process
def test_a_range_run_leaves_the_record_dagsters_own_storage_leaves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Spies that call through. Dagster swallows an error of store_event_batch (it stores the events one
    # by one instead), and a renamed private method would leave our override uncalled: either way the
    # record below would still match, so the spies require that our code ran, and ran without error.
    batches: list[tuple[int, set, bool]] = []
    planned_checks: list[int] = []
    store_batch = vars(BatchingSqliteEventLogStorage)["store_event_batch"]  # ours, not an inherited one
    store_planned = vars(BatchingSqliteEventLogStorage)["_store_asset_check_evaluation_planned"]

    def batch_spy(self: BatchingSqliteEventLogStorage, events) -> None:
        batches.append((len(events), {event.dagster_event_type for event in events}, False))
        store_batch(self, events)
        batches[-1] = (*batches[-1][:2], True)

    def planned_spy(self: BatchingSqliteEventLogStorage, event, event_id) -> None:
        store_planned(self, event, event_id)
        planned_checks.append(len(event.get_dagster_event().event_specific_data.partitions_subset or []))

    monkeypatch.setattr(BatchingSqliteEventLogStorage, "store_event_batch", batch_spy)
    monkeypatch.setattr(BatchingSqliteEventLogStorage, "_store_asset_check_evaluation_planned", planned_spy)
    lake, lake_run = _run_every_day(tmp_path / "lake", (REPO / "dagster.yaml").read_text(), monkeypatch)
    assert isinstance(lake.event_log_storage, BatchingSqliteEventLogStorage)  # the repository's dagster.yaml
    # Dagster still hands a range run's materializations over as one batch, which our storage wrote
    assert (60, {dg.DagsterEventType.ASSET_MATERIALIZATION}, True) in batches
    assert all(stored for *_, stored in batches)
    assert planned_checks == [60]  # Dagster still stores a planned check through the method we replace
    # the event log is where Dagster's sqlite storage keeps it
    assert (tmp_path / "lake" / "history" / "runs" / f"{lake_run}.db").exists()
    ours = _record(lake, lake_run)
    lake.dispose()

    monkeypatch.delenv("DAGSTER_HOME")
    dagster, dagster_run = _run_every_day(tmp_path / "dagster", DAGSTER_SQLITE, monkeypatch)
    assert not isinstance(dagster.event_log_storage, BatchingSqliteEventLogStorage)
    theirs = _record(dagster, dagster_run)
    dagster.dispose()

    assert len(ours["materialized"]) == 60 and ours["in_run"] == 60 and ours["latest_partition"] == "2024-02-29"
    assert ours["one_day"] == [("2024-02-10", lake_run)] and ours["asset_last_run"] == lake_run
    # the check planned for each of the run's days, and its one evaluation (as Dagster records them)
    assert sorted(c[0] for c in ours["checks"] if c[1] == "PLANNED") == DAYS.get_partition_keys()
    assert [c for c in ours["checks"] if c[1] != "PLANNED"] == [(None, "SUCCEEDED", True, "ASSET_CHECK_EVALUATION")]
    for record in (ours, theirs):
        record["per_record"] = [(p, m) for p, _, m in record["per_record"]]  # run ids differ
        record["one_day"] = [p for p, _ in record["one_day"]]
        record.pop("asset_last_run")
    assert ours == theirs


def test_events_that_are_not_one_kind_of_one_run_are_stored_one_by_one(tmp_path: Path) -> None:
    storage = BatchingSqliteEventLogStorage(str(tmp_path))
    stored: list[dg.EventLogEntry] = []
    storage.store_event = stored.append  # type: ignore[method-assign]
    events = [dg.EventLogEntry(error_info=None, level="INFO", user_message="hello", run_id="r", timestamp=1.0)] * 2
    storage.store_event_batch(events)  # not asset events: Dagster's own path, event by event
    assert stored == events
    assert os.path.isdir(tmp_path / "history" / "runs")


KEYS = dg.DynamicPartitionsDefinition(name="values")
VALUES = [f"v{i:02d}" for i in range(30)]
OTHER = dg.AssetKey(["values"])


@dg.asset(key=OTHER, partitions_def=KEYS, config_schema={"batched": bool})
def values(context: dg.AssetExecutionContext) -> None:
    """Materializes every value's partition from a run that is not partitioned: batched, or one by one."""
    events = [dg.AssetMaterialization(asset_key=OTHER, partition=v, metadata={"value": v}) for v in VALUES]
    if context.op_execution_context.op_config["batched"]:
        log_asset_events(context, events)
    else:
        for event in events:
            context.log_event(event)


@pytest.mark.integration  # a run on a real instance (its compute-log capture starts a `tail` process)
def test_events_logged_as_a_batch_are_stored_at_once_and_read_as_logged_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    batches: list[int] = []
    store_batch = vars(BatchingSqliteEventLogStorage)["store_event_batch"]

    def batch_spy(self: BatchingSqliteEventLogStorage, events) -> None:
        store_batch(self, events)
        batches.append(len(events))

    monkeypatch.setattr(BatchingSqliteEventLogStorage, "store_event_batch", batch_spy)
    (tmp_path / "dagster.yaml").write_text((REPO / "dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    for name, value in DAGSTER_ENV.items():
        monkeypatch.setenv(name, value)
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions("values", VALUES)
    seen = {}
    for batched in (True, False):
        op_config = {"ops": {"values": {"config": {"batched": batched}}}}
        run = dg.materialize([values], instance=instance, run_config=op_config)
        records = instance.fetch_materializations(OTHER, limit=1000).records
        seen[batched] = sorted((r.partition_key, r.asset_materialization.metadata["value"].value)
                               for r in records if r.run_id == run.run_id and r.partition_key)
        if batched:
            assert batches == [30]  # the batch reached our storage whole, and was stored
    assert batches == [30]  # logged one by one: no batch
    assert seen[True] == seen[False] == [(v, v) for v in VALUES]
    assert instance.get_materialized_partitions(OTHER) == set(VALUES)
    instance.dispose()
