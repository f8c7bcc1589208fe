"""What `lake put` says of a raw object's name before any run: the rules a run applies."""

import datetime as dt

import pytest

from lake_assets.core.apply.intake import refusal
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.dms import DmsLayout
from lake_assets.core.registry import parse

pytestmark = pytest.mark.unit
NOW = dt.datetime(2024, 4, 2, 9, 30, tzinfo=dt.timezone.utc)


def _declared(sequence_by: str) -> object:
    return parse(f"""
name: ordered
group: ordered
keys: [id]
columns:
  - {{name: id, type: INT, nullable: false}}
  - {{name: seq, type: BIGINT}}
{sequence_by}
sources:
  - {{prefix: raw/ordered/cdc/, kind: cdc}}
""", "test")


def test_a_cdc_name_without_a_time_is_refused_unless_a_column_orders_the_changes() -> None:
    timed = _declared("")
    said = refusal(timed, "raw/ordered/cdc/changes.csv", DmsLayout(), NOW)
    assert said is not None and "no_sequence" in said and "--as 20240402-093000000.csv" in said
    assert refusal(timed, "raw/ordered/cdc/20240402-093000000.csv", DmsLayout(), NOW) is None
    ordered = _declared("sequence_by: seq")
    assert refusal(ordered, "raw/ordered/cdc/changes.csv", DmsLayout(), NOW) is None  # a run applies it


def test_a_partition_snapshot_outside_its_partitions_folder_is_refused_with_where_to_put_it() -> None:
    declared = parse("""
name: daily
group: daily
keys: [id]
partition_by: [day]
columns:
  - {name: id, type: INT, nullable: false}
  - {name: day, type: DATE}
sources:
  - {prefix: raw/daily/days/, kind: snapshot, partition: day}
""", "test")
    assert refusal(declared, "raw/daily/days/day=2024-04-01/x.csv", DmsLayout(), NOW) is None
    told = refusal(declared, "raw/daily/days/x.csv", DmsLayout(), NOW)
    assert told is not None and told.startswith("x.csv will be refused (wrong_partition): not in a day=<value> folder")
    assert told.endswith("e.g. --as day=<value>/x.csv")
    told = refusal(declared, "raw/daily/days/day=04-01-2024/x.csv", DmsLayout(), NOW)
    assert told is not None and "day=04-01-2024 does not name a DATE value of day" in told
    # with daily partitions, a day they do not hold is no partition of the table either
    calendar = TableDeclaration.model_validate({**declared.model_dump(),
                                                "daily_partitions": {"start": dt.date(2024, 1, 1)}})
    assert refusal(calendar, "raw/daily/days/day=2024-04-01/x.csv", DmsLayout(), NOW) is None
    told = refusal(calendar, "raw/daily/days/day=2023-12-31/x.csv", DmsLayout(), NOW)
    assert told is not None and told.startswith(
        "x.csv will be refused (wrong_partition): day=2023-12-31 (2023-12-31) is outside the table's daily "
        "partitions (2024-01-01..today)")


def test_a_cdc_name_without_a_time_is_fine_for_a_source_ordered_by_arrival() -> None:
    declared = parse("""
name: dims
group: dims
keys: [id]
columns:
  - {name: id, type: INT, nullable: false}
sources:
  - {prefix: raw/dims/named/, kind: cdc}
  - {prefix: raw/dims/arrival/, kind: snapshot, sequence_from: arrival}
""", "test")
    arrival = parse("""
name: dims
group: dims
keys: [id]
columns:
  - {name: id, type: INT, nullable: false}
sources:
  - {prefix: raw/dims/named/, kind: cdc, sequence_from: arrival}
""", "test")
    assert refusal(declared, "raw/dims/named/items.csv", DmsLayout(), NOW) is not None
    assert refusal(arrival, "raw/dims/named/items.csv", DmsLayout(), NOW) is None
