"""A declared table of partition snapshots is partitioned in Dagster by its column's values: every
run registers and materializes the partitions it loaded, with their own counts, and a run started
for partitions (as the UI's materialize or backfill starts it) loads them again. On the real
embedded S3, Sail and the lake's Dagster instance; delta-rs deletes a row from outside the lake
(the damage a partition's run repairs) and reads the table back."""

import datetime as dt
from pathlib import Path

import dagster as dg
from deltalake import DeltaTable

from lake_assets.cli.dev_runs import RunReporter
from lake_assets.cli.session import dagster_instance
from lake_assets.definitions import build_definitions
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings
from lake_assets_tests.helpers.cli import lake

DECLARATION = """name: visits
group: web
keys: [id]
columns:
  - {name: id, type: BIGINT, nullable: false}
  - {name: day, type: DATE}
  - {name: pages, type: BIGINT}
sources:
  - {prefix: raw/visits/days/, kind: snapshot, partition: day}
  - {prefix: raw/visits/cdc/, kind: cdc}
"""
PARTITIONS = "visits_day"
KEY = dg.AssetKey("visits")


def _rows(storage: LakeStorage) -> dict[int, int]:
    table = DeltaTable(storage.uri("curated/visits"), storage_options=storage.delta_storage_options())
    return {r["id"]: r["pages"] for r in table.to_pyarrow_table().to_pylist()}


def _put_day(tmp_path: Path, day: str, rows: str) -> None:
    (tmp_path / f"{day}.csv").write_text(rows)
    code, out = lake("put", str(tmp_path / f"{day}.csv"), "--to", "visits:snapshot", "--as", f"day={day}/part-0.csv")
    assert code == 0, out


def _materialized(instance: dg.DagsterInstance, run_id: str) -> dict[str | None, dict]:
    """The run's materializations of the table: partition -> metadata (plain values)."""
    records = [r for r in instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=KEY), limit=1000).records
               if r.run_id == run_id and r.asset_materialization is not None]
    partitions = [r.partition_key for r in records]
    assert len(partitions) == len(set(partitions)), partitions  # one materialization per partition and run
    return {r.partition_key: {k: v.value for k, v in r.asset_materialization.metadata.items()} for r in records}


def _dev_line(instance: dg.DagsterInstance, run_id: str) -> str:
    """The run's line as `lake dev` prints it."""
    reporter = RunReporter(instance, since=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    return next(line for line in reporter.new_lines() if run_id[:8] in line)


def _newest_run(instance: dg.DagsterInstance) -> str:
    return instance.get_runs(filters=dg.RunsFilter(job_name="apply_visits"), limit=1)[0].run_id


def _run_for(instance: dg.DagsterInstance, **options: object) -> dg.ExecuteInProcessResult:
    """The table's job started for partitions, as the daemon starts a UI backfill's run."""
    job = build_definitions(LakeSettings.from_env()).resolve_job_def("apply_visits")
    return job.execute_in_process(instance=instance, raise_on_error=False, **options)


def test_partitions_are_registered_materialized_and_loaded_again(lake_env: LakeStorage, tables_dir: Path,
                                                                 tmp_path: Path) -> None:
    tables_dir.mkdir()
    (tables_dir / "visits.yaml").write_text(DECLARATION)
    _put_day(tmp_path, "2024-04-01", "1,2024-04-01,10\n2,2024-04-01,20\n")
    _put_day(tmp_path, "2024-04-02", "3,2024-04-02,30\n")
    correction = tmp_path / "20240405-000000000.csv"
    correction.write_text("U,1,2024-04-01,11\n")
    assert lake("put", str(correction), "--to", "visits:cdc")[0] == 0
    code, out = lake("run")
    assert code == 0, out
    assert _rows(lake_env) == {1: 11, 2: 20, 3: 30}
    told = [line for line in out.splitlines() if line.startswith("visits: ")]  # the table's line, once
    assert len(told) == 1 and "created at version 0, rows 0 -> 3" in told[0], out

    instance = dagster_instance(LakeSettings.from_env())
    assert set(instance.get_dynamic_partitions(PARTITIONS)) == {"2024-04-01", "2024-04-02"}  # not the CDC file
    first = _materialized(instance, _newest_run(instance))
    assert "files 3 applied, 0 refused, 0 held; rows 3 applied, 1 superseded" in _dev_line(instance, _newest_run(instance))
    assert first[None]["rows_after"] == 3  # the table's own, of the whole run (the sensor's runs are not partitioned)
    # key 1's row of the day lost to the newer correction, in the same run
    assert {k: (v["partition_objects"], v["partition_rows_applied"], v["partition_rows_superseded"], v["partition_source_objects"])
            for k, v in first.items() if k} == {
        "2024-04-01": (1, 1, 1, ["raw/visits/days/day=2024-04-01/part-0.csv"]),
        "2024-04-02": (1, 1, 0, ["raw/visits/days/day=2024-04-02/part-0.csv"])}

    # a run for one partition loads its newest snapshot again: the row lost comes back, the correction stays
    DeltaTable(lake_env.uri("curated/visits"), storage_options=lake_env.delta_storage_options()).delete("id = 2")
    result = _run_for(instance, partition_key="2024-04-01")
    assert result.success
    assert _rows(lake_env) == {1: 11, 2: 20, 3: 30}
    again = _materialized(instance, result.run_id)
    assert set(again) == {"2024-04-01"}, again
    assert (again["2024-04-01"]["partition_rows_applied"], again["2024-04-01"]["partition_rows_superseded"]) == (1, 1)

    # a range of partitions in one run of the table alone (the UI's backfill: BackfillPolicy.single_run, and
    # a selection of the assets that share the partitions): intact, so nothing written
    version = DeltaTable(lake_env.uri("curated/visits"), storage_options=lake_env.delta_storage_options()).version()
    result = _run_for(instance, asset_selection=[KEY], tags={"dagster/asset_partition_range_start": "2024-04-01",
                                                             "dagster/asset_partition_range_end": "2024-04-02"})
    assert result.success
    beside = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=dg.AssetKey("visits_history")),
                                             limit=1).records[0]
    assert beside.run_id == result.run_id  # the tables the run writes beside are reported too
    assert DeltaTable(lake_env.uri("curated/visits"), storage_options=lake_env.delta_storage_options()).version() \
        == version
    both = _materialized(instance, result.run_id)
    assert {v["rows_superseded"] for v in both.values()} == {3}  # each partition's materialization: the run's too
    # what `lake dev` prints: the run counted once
    assert "files 2 applied, 0 refused, 0 held; rows 0 applied, 3 superseded" in _dev_line(instance, result.run_id)
    assert {k: (v["partition_objects"], v["partition_rows_applied"], v["partition_rows_superseded"]) for k, v in both.items()} == {
        "2024-04-01": (1, 0, 2), "2024-04-02": (1, 0, 1)}

    # a partition with no applied snapshot: the run says so and changes nothing
    instance.add_dynamic_partitions(PARTITIONS, ["2024-05-09"])
    result = _run_for(instance, partition_key="2024-05-09")
    assert result.success and _rows(lake_env) == {1: 11, 2: 20, 3: 30}
    warnings = [e.message for e in instance.all_logs(result.run_id) if e.level == 30]  # logging.WARNING
    assert any("1 of the run's 1 partition(s) have no applied snapshot to load again: 2024-05-09" in w
               for w in warnings), warnings

    # new days through `lake run`: each registered; one materialized on its own, one held (a refused row)
    _put_day(tmp_path, "2024-04-03", "4,2024-04-03,40\n")
    _put_day(tmp_path, "2024-04-04", "5,2024-04-04,50\nfive,2024-04-04,50\n")
    code, out = lake("run")
    assert code == 0 and "held: raw/visits/days/day=2024-04-04/part-0.csv" in out, out
    assert len([line for line in out.splitlines() if line.startswith("visits: ")]) == 1, out
    assert {"2024-04-01", "2024-04-02", "2024-04-03", "2024-04-04"} <= set(instance.get_dynamic_partitions(PARTITIONS))
    run_id = _newest_run(instance)
    third = _materialized(instance, run_id)
    assert {k for k in third if k} == {"2024-04-03"} and third["2024-04-03"]["partition_rows_applied"] == 1
    seen = instance.fetch_observations(dg.AssetRecordsFilter(asset_key=KEY, asset_partitions=["2024-04-04"]),
                                       limit=1).records
    assert seen and seen[0].run_id == run_id, seen
    held = seen[0].asset_observation.metadata
    assert held["held_objects"].value[0]["object"] == "raw/visits/days/day=2024-04-04/part-0.csv", held
    assert "quarantined" in held["held_objects"].value[0]["reason"], held
    assert held["publish_with"].value == "lake approve raw/visits/days/day=2024-04-04/part-0.csv"
