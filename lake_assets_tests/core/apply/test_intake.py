"""What `lake put` says of a raw object's name before any run: the rules a run applies."""

import datetime as dt

import pytest

from lake_assets.core.apply.intake import refusal
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
