"""Databricks' documented `AUTO CDC` (`APPLY CHANGES`) examples, declared in YAML and applied by the
change core: the expected tables are the ones Databricks' "APPLY CHANGES" page shows for its `users`
example (SCD type 1; SCD type 2; SCD type 2 with `TRACK HISTORY ON * EXCEPT (city)`; the same data
with an `APPLY AS TRUNCATE` row), and `IGNORE NULL UPDATES` on a small example of its own.

The source rows carry their operation and sequence in columns (`APPLY AS DELETE WHEN operation =
"DELETE"`, `SEQUENCE BY sequenceNum`, `COLUMNS * EXCEPT (operation, sequenceNum)`); the lake's
history keeps a delete as a row of its own, so DLT's rows are its rows that are not deletes, and
DLT's `__START_AT` / `__END_AT` are the sequence values at the start of `_sequence` /
`valid_to_sequence`.
"""

import uuid

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.apply.run import apply_pending
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.ledger import Ledger
from lake_assets.core.registry import parse
from lake_assets.core.tables import table_set
from lake_assets.declared.checks import history_matches_table
from lake_assets.resources.storage import LakeStorage

HEADER = "userId,name,city,operation,sequenceNum"
#: The documented example's change rows (userId, name, city, operation, sequenceNum).
USERS = [
    "124,Raul,Oaxaca,INSERT,1",
    "123,Isabel,Monterrey,INSERT,1",
    "125,Mercedes,Tijuana,INSERT,2",
    "126,Lily,Cancun,INSERT,2",
    "123,,,DELETE,6",
    "125,Mercedes,Guadalajara,UPDATE,6",
    "125,Mercedes,Mexicali,UPDATE,5",
    "123,Isabel,Chihuahua,UPDATE,5",
]


def declared(options: str = "") -> TableDeclaration:
    name = f"users_{uuid.uuid4().hex[:6]}"
    return parse(f"""
name: {name}
group: users
keys: [userid]
columns:
  - {{name: userid, type: INT, nullable: false}}
  - {{name: name, type: STRING}}
  - {{name: city, type: STRING}}
  - {{name: operation, type: STRING}}
  - {{name: sequencenum, type: BIGINT}}
sequence_by: sequencenum
except_columns: [operation, sequencenum]
sources:
  - {{prefix: raw/{name}/cdc/, kind: cdc, operation_column: operation, delete: DELETE, truncate: TRUNCATE}}
{options}
""", "test")


def apply(storage: LakeStorage, spark: SparkSession, table: TableDeclaration, *files: list[str]) -> None:
    for number, rows in enumerate(files):
        storage.put_bytes(f"{table.sources[0].prefix}changes-{number}.csv", "\n".join([HEADER, *rows, ""]).encode())
        apply_pending(table, storage, spark, f"run-{number}")


def scd1(storage: LakeStorage, table: TableDeclaration) -> dict[int, tuple]:
    rows = _read(storage, table_set(table).table.uri(storage))
    return {r["userid"]: (r["name"], r["city"]) for r in rows}


def scd2(storage: LakeStorage, table: TableDeclaration) -> list[tuple]:
    """DLT's SCD2 rows: (userId, name, city, __START_AT, __END_AT)."""
    rows = [r for r in _read(storage, table_set(table).history.uri(storage)) if r["_operation"] != "D"]
    return sorted(((r["userid"], r["name"], r["city"], _value(r["_sequence"]), _value(r["valid_to_sequence"]))
                   for r in rows), key=lambda r: (r[0], r[3]))


def _read(storage: LakeStorage, uri: str) -> list[dict]:
    return DeltaTable(uri, storage_options=storage.delta_storage_options()).to_pyarrow_table().to_pylist()


def _value(sequence: str | None) -> int | None:
    """The `sequenceNum` a sequence starts with (its time slot holds the column's value)."""
    return None if sequence is None else int(sequence.split(".")[0])


def test_scd_type_1_and_2_of_the_documented_example(storage: LakeStorage, spark: SparkSession) -> None:
    table = declared()
    apply(storage, spark, table, USERS)
    assert scd1(storage, table) == {124: ("Raul", "Oaxaca"), 125: ("Mercedes", "Guadalajara"), 126: ("Lily", "Cancun")}
    assert scd2(storage, table) == [
        (123, "Isabel", "Monterrey", 1, 5), (123, "Isabel", "Chihuahua", 5, 6),
        (124, "Raul", "Oaxaca", 1, None),
        (125, "Mercedes", "Tijuana", 2, 5), (125, "Mercedes", "Mexicali", 5, 6), (125, "Mercedes", "Guadalajara", 6, None),
        (126, "Lily", "Cancun", 2, None),
    ]
    assert "operation" not in DeltaTable(table_set(table).table.uri(storage),
                                         storage_options=storage.delta_storage_options()).schema().to_arrow().names
    # the blocking check compares the stored columns (it read the `except_columns` too, and failed)
    assert history_matches_table(table, storage, spark).passed


def test_the_same_changes_in_any_runs_give_the_same_tables(storage: LakeStorage, spark: SparkSession) -> None:
    """Out of order and split over runs (`SEQUENCE BY` orders them, not their arrival)."""
    table = declared()
    apply(storage, spark, table, USERS[4:], USERS[:2], USERS[2:4])
    assert scd1(storage, table) == {124: ("Raul", "Oaxaca"), 125: ("Mercedes", "Guadalajara"), 126: ("Lily", "Cancun")}
    assert (125, "Mercedes", "Tijuana", 2, 5) in scd2(storage, table)


def test_track_history_on_all_but_city(storage: LakeStorage, spark: SparkSession) -> None:
    """`TRACK HISTORY ON * EXCEPT (city)`: a change of city updates the current version in place."""
    table = declared("track_history_except: [city]")
    apply(storage, spark, table, USERS)
    assert scd2(storage, table) == [
        (123, "Isabel", "Chihuahua", 1, 6), (124, "Raul", "Oaxaca", 1, None),
        (125, "Mercedes", "Guadalajara", 2, None), (126, "Lily", "Cancun", 2, None),
    ]
    assert history_matches_table(table, storage, spark).passed


def test_apply_as_truncate(storage: LakeStorage, spark: SparkSession) -> None:
    """A `TRUNCATE` row at sequence 3 deletes every key whose newest change is not newer."""
    table = declared()
    apply(storage, spark, table, [*USERS, ",,,TRUNCATE,3"])
    assert scd1(storage, table) == {125: ("Mercedes", "Guadalajara")}
    entry = next(e for e in Ledger(storage).entries(table.name).to_pylist())
    assert entry["rows_applied"] + entry["rows_superseded"] + entry["rows_quarantined"] == entry["rows_in_file"] == 9


def test_ignore_null_updates(storage: LakeStorage, spark: SparkSession) -> None:
    """An update's NULL columns keep the key's values (in the run, and from the table's row after)."""
    table = declared("ignore_null_updates: true")
    apply(storage, spark, table, ["124,Raul,Oaxaca,INSERT,1", "124,,Puebla,UPDATE,2"], ["124,Ramon,,UPDATE,3"])
    assert scd1(storage, table) == {124: ("Ramon", "Puebla")}
    assert scd2(storage, table) == [(124, "Raul", "Oaxaca", 1, 2), (124, "Raul", "Puebla", 2, 3),
                                    (124, "Ramon", "Puebla", 3, None)]


def test_without_ignore_null_updates_nulls_are_written(storage: LakeStorage, spark: SparkSession) -> None:
    table = declared()
    apply(storage, spark, table, ["124,Raul,Oaxaca,INSERT,1", "124,,Puebla,UPDATE,2"])
    assert scd1(storage, table) == {124: (None, "Puebla")}


@pytest.mark.parametrize(("options", "message"), [
    ("expectations: [{name: known_city, condition: \"city IS NOT NULL\", action: fail}]", "known_city"),
])
def test_an_expect_or_fail_expectation_fails_the_run_and_applies_nothing(
        storage: LakeStorage, spark: SparkSession, options: str, message: str) -> None:
    from lake_assets.core.apply.expectations import ExpectationFailed

    table = declared(options)
    with pytest.raises(ExpectationFailed, match=message):
        apply(storage, spark, table, USERS)
    assert not Ledger(storage).entries(table.name).num_rows  # nothing recorded: the objects stay pending


def test_expect_or_drop_quarantines_and_warn_counts(storage: LakeStorage, spark: SparkSession) -> None:
    table = declared("expectations:\n"
                     "  - {name: not_tijuana, condition: \"city <> 'Tijuana'\", action: drop}\n"
                     "  - {name: short_name, condition: \"length(name) < 6\", action: warn}")
    storage.put_bytes(f"{table.sources[0].prefix}changes.csv", "\n".join([HEADER, *USERS, ""]).encode())
    report = apply_pending(table, storage, spark, "run-1")
    # DELETE rows have no city or name: NULL is not true, so they fail both (a delete's other fields are not applied)
    assert report.expectations == {"not_tijuana": 2, "short_name": 6}
    quarantined = _read(storage, table_set(table).quarantine.uri(storage))
    assert sorted((q["reason"], q["detail"].split(":")[0]) for q in quarantined) == [
        ("expectation", "not_tijuana"), ("expectation", "not_tijuana")]
    entry = report.files[0]
    assert (entry.rows_quarantined, entry.rows_applied + entry.rows_superseded) == (2, 6)
