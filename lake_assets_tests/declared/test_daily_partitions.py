"""A declared table of partition snapshots with `daily_partitions` is partitioned in Dagster by day
over its calendar, whether its column holds the date or the day's Julian day number (TPC-DS's date
keys): runs materialize the days they loaded, a run for a range of days loads them again, and
`lake backfill --from/--to` takes days. A day outside the calendar is refused until the calendar
holds it; NULL's folder is loaded, with no partition.
DuckDB's `julian()` is the reference for day numbers; the lake's own Dagster instance, S3 and Sail
run the rest, and delta-rs reads the table."""

import datetime as dt
from pathlib import Path

import dagster as dg
import duckdb
import pytest
from deltalake import DeltaTable

from lake_assets.cli.session import dagster_instance
from lake_assets.core.declaration import DeclarationError, TableDeclaration
from lake_assets.cli import job_runner
from lake_assets.core import registry
from lake_assets.core.registry import parse
from lake_assets.declared.partitions import partition_key, partitions_def
from lake_assets.definitions import build_definitions
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings
from lake_assets_tests.helpers.cli import lake

KEY = dg.AssetKey("sales")


def _text(column_type: str = "BIGINT", daily: str = "{start: 2024-04-01, end: 2024-04-03, values: julian_day}",
          partition: str = "partition: day_sk") -> str:
    """A table of sales whose snapshots are of one day each, its folders named by `day_sk`."""
    return f"""name: sales
group: shop
keys: [id]
columns:
  - {{name: id, type: BIGINT, nullable: false}}
  - {{name: day_sk, type: {column_type}}}
  - {{name: amount, type: BIGINT}}
daily_partitions: {daily}
sources:
  - {{prefix: raw/sales/days/, kind: snapshot, {partition}}}
  - {{prefix: raw/sales/cdc/, kind: cdc}}
"""


def _declared(*args: str) -> TableDeclaration:
    return parse(_text(*args), "sales.yaml")


def _julian(day: dt.date) -> int:
    """DuckDB's Julian day number of `day` (the independent reference)."""
    return int(duckdb.sql(f"SELECT julian(DATE '{day}')").fetchone()[0])


def test_a_day_and_its_julian_number_name_one_partition() -> None:
    daily = _declared().daily_partitions
    assert daily is not None
    for day in (dt.date(1970, 1, 1), dt.date(1998, 1, 2), dt.date(2024, 4, 1), dt.date(2024, 2, 29)):
        assert daily.value(day) == _julian(day) and daily.day(_julian(day)) == day
    declared = _declared()
    assert [partition_key(declared, _julian(dt.date(2024, 4, d))) for d in (1, 3)] == ["2024-04-01", "2024-04-03"]
    assert partition_key(declared, _julian(dt.date(2024, 3, 31))) is None  # before the calendar
    assert partition_key(declared, _julian(dt.date(2024, 4, 4))) is None  # after it
    assert partition_key(declared, None) is None  # NULL's folder names no day
    dates = _declared("DATE", "{start: 2024-04-01}")
    assert partition_key(dates, dt.date(2031, 5, 6)) == "2031-05-06"  # no end: every day from the start


def test_the_partitions_are_the_calendars_days() -> None:
    definition = partitions_def(_declared())
    assert isinstance(definition, dg.DailyPartitionsDefinition)
    assert definition.get_partition_keys() == ["2024-04-01", "2024-04-02", "2024-04-03"]
    open_ended = partitions_def(_declared("DATE", "{start: 2024-04-01, values: date}"))
    assert isinstance(open_ended, dg.DailyPartitionsDefinition)
    keys = open_ended.get_partition_keys()
    assert keys[0] == "2024-04-01" and keys[-1] == dt.datetime.now(dt.timezone.utc).date().isoformat()


@pytest.mark.parametrize(("column_type", "daily", "partition", "message"), [
    ("BIGINT", "{start: 2024-04-01}", "partition: day_sk", "values: date names a day by a DATE column; day_sk is BIGINT"),
    ("DATE", "{start: 2024-04-01, values: julian_day}", "partition: day_sk",
     "values: julian_day names a day by a INT or BIGINT column; day_sk is DATE"),
    ("BIGINT", "{start: 2024-04-01, end: 2024-03-01, values: julian_day}", "partition: day_sk",
     "end 2024-03-01 is before start 2024-04-01"),
    ("BIGINT", "{start: 2024-04-01, values: julian_day}", "suffix: .csv",
     "daily_partitions: for a table fed by partition snapshots"),
    ("BIGINT", "{start: 2024-04-01, values: weekly}", "partition: day_sk", "'date' or 'julian_day'"),
])
def test_a_calendar_that_cannot_be_is_one_line(column_type: str, daily: str, partition: str, message: str) -> None:
    with pytest.raises(DeclarationError) as raised:
        _declared(column_type, daily, partition)
    assert raised.value.args[0].startswith("sales.yaml: ") and message in raised.value.args[0]
    assert "\n" not in raised.value.args[0]


def _rows(storage: LakeStorage) -> dict[int, int]:
    table = DeltaTable(storage.uri("curated/sales"), storage_options=storage.delta_storage_options())
    return {r["id"]: r["amount"] for r in table.to_pyarrow_table().to_pylist()}


def _put(tmp_path: Path, day: dt.date | None, rows: list[tuple[int, int]]) -> None:
    folder = "__HIVE_DEFAULT_PARTITION__" if day is None else str(_julian(day))
    path = tmp_path / f"{folder}.csv"
    path.write_text("".join(f"{i},{'' if day is None else _julian(day)},{amount}\n" for i, amount in rows))
    code, out = lake("put", str(path), "--to", "sales:snapshot", "--as", f"day_sk={folder}/part-0.csv")
    assert code == 0, out


def _materialized(instance: dg.DagsterInstance, run_id: str) -> set[str | None]:
    records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=KEY), limit=100).records
    return {r.partition_key for r in records if r.run_id == run_id}


def test_days_are_materialized_loaded_again_and_backfilled(lake_env: LakeStorage, tables_dir: Path,
                                                           tmp_path: Path) -> None:
    tables_dir.mkdir()
    (tables_dir / "sales.yaml").write_text(_text())
    _put(tmp_path, dt.date(2024, 4, 1), [(1, 10), (2, 20)])
    _put(tmp_path, dt.date(2024, 4, 2), [(3, 30)])
    _put(tmp_path, dt.date(2024, 4, 9), [(4, 40)])  # after the calendar: refused by its place, blocks nothing
    _put(tmp_path, None, [(5, 50)])  # NULL's folder: loaded, no partition
    code, out = lake("run")
    assert code == 3, out  # an object refused, everything else applied
    assert f"day_sk={_julian(dt.date(2024, 4, 9))} (2024-04-09) is outside the table's daily partitions " \
           "(2024-04-01..2024-04-03)" in out, out
    assert _rows(lake_env) == {1: 10, 2: 20, 3: 30, 5: 50}
    instance = dagster_instance(LakeSettings.from_env())
    first = instance.get_runs(filters=dg.RunsFilter(job_name="apply_sales"), limit=1)[0].run_id
    assert _materialized(instance, first) == {None, "2024-04-01", "2024-04-02"}

    # the calendar widened: the refused day is pending again, and is a partition of its own
    (tables_dir / "sales.yaml").write_text(_text(daily="{start: 2024-04-01, end: 2024-04-09, values: julian_day}"))
    registry.declarations.cache_clear()  # each `lake` command reads them afresh; this test's run in its process,
    job_runner._definitions.cache_clear()  # which keeps them, and the definitions built from them
    code, out = lake("run")
    assert code == 0, out
    assert _rows(lake_env) == {1: 10, 2: 20, 3: 30, 4: 40, 5: 50}, out
    assert "rows_conserved: passed" in out, out  # the refusal's quarantined row is released: read again
    widened = instance.get_runs(filters=dg.RunsFilter(job_name="apply_sales"), limit=1)[0].run_id
    assert _materialized(instance, widened) == {None, "2024-04-09"}

    # the UI's backfill of a range of days: one run, which loads each day's snapshot again
    DeltaTable(lake_env.uri("curated/sales"), storage_options=lake_env.delta_storage_options()).delete("id IN (2, 3)")
    job = build_definitions(LakeSettings.from_env()).resolve_job_def("apply_sales")
    result = job.execute_in_process(instance=instance, raise_on_error=False, asset_selection=[KEY],
                                    tags={"dagster/asset_partition_range_start": "2024-04-01",
                                          "dagster/asset_partition_range_end": "2024-04-03"})
    assert result.success
    assert _rows(lake_env) == {1: 10, 2: 20, 3: 30, 4: 40, 5: 50}
    assert _materialized(instance, result.run_id) == {"2024-04-01", "2024-04-02", "2024-04-03"}  # the run's range
    warnings = [e.message for e in instance.all_logs(result.run_id) if e.level == 30]  # logging.WARNING
    assert any("1 of the run's 3 partition(s) have no applied snapshot to load again: 2024-04-03" in w
               for w in warnings), warnings

    # `lake backfill` takes days for a table whose days are Julian day numbers (and the numbers too)
    DeltaTable(lake_env.uri("curated/sales"), storage_options=lake_env.delta_storage_options()).delete("id = 3")
    code, out = lake("backfill", "sales", "--from", "2024-04-02", "--to", "2024-04-02")
    assert code == 0 and "sales: loading 1 object(s) again" in out, out
    assert _rows(lake_env)[3] == 30
    code, out = lake("backfill", "sales", "--partition", str(_julian(dt.date(2024, 4, 9))))
    assert code == 0 and f"day_sk={_julian(dt.date(2024, 4, 9))}/part-0.csv" in out, out
