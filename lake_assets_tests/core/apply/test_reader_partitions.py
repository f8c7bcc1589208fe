"""The partition a partition snapshot's folder names, and what the reader makes of rows of another."""

import datetime as dt

import pyarrow as pa
import pytest

from lake_assets.core.apply.partitions import FolderPartition, folder_partition
from lake_assets.core.apply.reader import DETAIL, KIND, REASON, ObjectToRead, RowKind, read_object
from lake_assets.core.declaration import SourceKind, TableDeclaration
from lake_assets.core.dms import DmsLayout
from lake_assets.core.registry import parse

pytestmark = pytest.mark.unit


def _declared(kind: str) -> TableDeclaration:
    return parse(f"""
name: parts
group: parts
keys: [id]
partition_by: [p]
columns:
  - {{name: id, type: INT, nullable: false}}
  - {{name: p, type: {kind}}}
  - {{name: note, type: STRING}}
sources:
  - {{prefix: raw/parts/days/, kind: snapshot, partition: p, delimiter: "|", suffix: .dat}}
""", "test")


@pytest.mark.parametrize("kind, folder, value", [
    ("DATE", "p=2024-04-01", dt.date(2024, 4, 1)),
    ("INT", "p=-7", -7),
    ("BIGINT", "p=9007199254740993", 9007199254740993),
    ("BOOLEAN", "p=TRUE", True),
    ("STRING", "p=north%20east", "north east"),  # Hive escapes a value's special characters
    ("STRING", "p=__HIVE_DEFAULT_PARTITION__", None),
    ("DATE", "p=__HIVE_DEFAULT_PARTITION__", None),
])
def test_a_folder_names_a_value_of_the_columns_type(kind: str, folder: str, value: object) -> None:
    declared = _declared(kind)
    found = folder_partition(declared, declared.sources[0], f"raw/parts/days/{folder}/part-0.dat")
    assert found == FolderPartition(value, folder)


@pytest.mark.parametrize("kind, key, says", [
    ("DATE", "raw/parts/days/part-0.dat", "not in a p=<value> folder directly under raw/parts/days/"),
    ("DATE", "raw/parts/days/p=2024-04-01/more/part-0.dat", "not in a p=<value> folder"),
    ("DATE", "raw/parts/days/q=2024-04-01/part-0.dat", "not in a p=<value> folder"),
    ("DATE", "raw/parts/days/p=2024-02-30/part-0.dat", "p=2024-02-30 does not name a DATE value of p"),
    ("INT", "raw/parts/days/p=2147483648/part-0.dat", "does not name a INT value"),
    ("INT", "raw/parts/days/p=1.5/part-0.dat", "does not name a INT value"),
    ("BOOLEAN", "raw/parts/days/p=yes/part-0.dat", "does not name a BOOLEAN value"),
    ("STRING", "raw/parts/days/p=/part-0.dat", "does not name a STRING value"),
])
def test_a_place_that_names_no_partition_is_refused_with_where_to_put_it(kind: str, key: str, says: str) -> None:
    declared = _declared(kind)
    found = folder_partition(declared, declared.sources[0], key)
    assert isinstance(found, str) and says in found and "raw/parts/days/p=<value>/" in found


@pytest.mark.parametrize("values, folder, day", [("date", "p=2024-03-31", "2024-03-31"),
                                                 ("date", "p=2024-05-01", "2024-05-01"),
                                                 ("julian_day", "p=2460401", "2024-03-31")])
def test_a_day_outside_the_tables_daily_partitions_is_refused_by_its_place(values: str, folder: str,
                                                                           day: str) -> None:
    """A folder of a day the table's Dagster partitions do not hold names no partition of the
    table: the object is refused (`wrong_partition`), not loaded into a day the UI cannot show."""
    kind = "DATE" if values == "date" else "BIGINT"
    declared = TableDeclaration.model_validate({**_declared(kind).model_dump(), "daily_partitions": {
        "start": dt.date(2024, 4, 1), "end": dt.date(2024, 4, 30), "values": values}})
    first = "p=2024-04-01" if values == "date" else "p=2460402"  # julian day 2460402 is 2024-04-01
    assert isinstance(folder_partition(declared, declared.sources[0], f"raw/parts/days/{first}/part-0.dat"),
                      FolderPartition)
    found = folder_partition(declared, declared.sources[0], f"raw/parts/days/{folder}/part-0.dat")
    assert isinstance(found, str) and found.startswith(f"{folder} ({day}) is outside the table's daily partitions "
                                                       "(2024-04-01..2024-04-30): never applied")
    null = folder_partition(declared, declared.sources[0], "raw/parts/days/p=__HIVE_DEFAULT_PARTITION__/part-0.dat")
    assert null == FolderPartition(None, "p=__HIVE_DEFAULT_PARTITION__")  # the rows without a day: no day to hold


def test_a_row_of_another_partition_is_refused_and_keeps_its_key() -> None:
    declared = _declared("INT")
    key = "raw/parts/days/p=1/part-0.dat"
    data = b"1|1|a, b\n2|2|c\n3||d\n4|1|e\n"  # 2 and 3 are not partition 1's (3's p is NULL)
    out = pa.concat_tables(read_object(declared, DmsLayout(), ObjectToRead(0, key, SourceKind.SNAPSHOT, "0" * 23, None),
                                       data, "etag")).to_pylist()
    assert [(r["id"], r["note"]) for r in out if r[KIND] == RowKind.ROW.value] == [(1, "a, b"), (4, "e")]
    refused = [r for r in out if r[KIND] == RowKind.REFUSAL.value]
    # the key of a refused row, read with the source's delimiter: the key keeps its row (not deleted)
    assert [(r["id"], r[REASON]) for r in refused] == [(2, "wrong_partition"), (3, "wrong_partition")]
    assert "its object's folder p=1 names" in refused[0][DETAIL]
    (summary,) = [r for r in out if r[KIND] == RowKind.FILE.value]
    assert (summary["_valid"], summary["_refused"]) == (2, 2)
