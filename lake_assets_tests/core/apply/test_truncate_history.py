"""The SCD2 history across an `APPLY AS TRUNCATE` and a full-load snapshot: a delete row at the
truncate (the snapshot's base) for every key that was live just before it, whether the truncate
deletes it from the table or a newer change brings it back, and for no other key (one already
deleted, one never there); the same whether the files are applied in one run or in several.

The truncate scenario: `a` (1) and `b` (2) inserted at 1, `z` (3) inserted at 1 and deleted at 2;
then a truncate at 6 in one file with `a`'s update at 8 and `d`'s (4) first change, an update at 4.
`a` is `A` over [1, 6), deleted at 6, `A2` from 8; `b` is `B` over [1, 6), deleted at 6; `z` has
its delete at 2 and no second one; `d`'s update at 4 is superseded by the truncate (the table never
holds it) and, like any superseded change, is a version closed by what follows it: the truncate's
delete at 6 (as if its update had been applied in a run before the truncate's). A late change of
`z` at 4 (older than the truncate, after its delete) is closed by a delete at the truncate: the
truncate would have deleted it had it come in time.
"""

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.apply.run import apply_pending
from lake_assets.core.tables import table_set
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.core.apply.test_options_model import HEADER, Change, Model, _line, _rows, declared
from lake_assets_tests.helpers.full_loads import load_load_change, loaded_table

A, B, Z, D = 1, 2, 3, 4
FIRST = [Change(A, "U", "A", None, 1), Change(B, "U", "B", None, 1), Change(Z, "U", "Z", None, 1),
         Change(Z, "D", None, None, 2)]
SECOND = [Change(None, "T", None, None, 6), Change(A, "U", "A2", None, 8), Change(D, "U", "D", None, 4)]
LATE = [Change(Z, "U", "Z2", None, 4)]
#: (key, operation, a, b, from, to) of every version and delete, in key and sequence order
HISTORY = [
    (A, "U", "A", None, 1, 6), (A, "D", None, None, 6, 6), (A, "U", "A2", None, 8, None),
    (B, "U", "B", None, 1, 6), (B, "D", None, None, 6, 6),
    (Z, "U", "Z", None, 1, 2), (Z, "D", None, None, 2, 2),
    (D, "U", "D", None, 4, 6), (D, "D", None, None, 6, 6),
]
AFTER_LATE = sorted([*HISTORY, (Z, "U", "Z2", None, 4, 6), (Z, "D", None, None, 6, 6)], key=lambda r: (r[0], r[4]))


def _model(runs: list[list[Change]]) -> Model:
    model = Model(False, None)
    for batch in runs:
        model.run(batch)
    return model


@pytest.mark.parametrize("runs", [[FIRST, SECOND], [FIRST + SECOND]], ids=["two runs", "one run"])
def test_the_models_history_across_a_truncate(runs: list[list[Change]]) -> None:
    model = _model(runs)
    assert model.table == {A: Change(A, "U", "A2", None, 8)}
    assert model.tombs == {B: 6, Z: 6, D: 6}  # z's tombstone moves: a change of it older than 6 loses
    assert model.history() == HISTORY
    model.run(LATE)
    assert model.table == {A: Change(A, "U", "A2", None, 8)}
    assert model.history() == AFTER_LATE


def test_the_model_closes_a_late_change_only_where_no_delete_does() -> None:
    """A key deleted at 3, not live at the truncate at 6 (its tombstone moved to 6): a late change
    at 2 is closed by the delete at 3, not by a second one at 6; a change of a key the truncate
    deleted, arriving later and older than it, is closed by the truncate's delete, not again."""
    model = _model([[Change(5, "U", "x", None, 1), Change(5, "D", None, None, 3), Change(6, "U", "y", None, 1)],
                    [Change(None, "T", None, None, 6)],
                    [Change(5, "U", "x2", None, 2), Change(6, "U", "y2", None, 4)]])
    assert model.table == {}
    assert model.history() == [
        (5, "U", "x", None, 1, 2), (5, "U", "x2", None, 2, 3), (5, "D", None, None, 3, 3),
        (6, "U", "y", None, 1, 4), (6, "U", "y2", None, 4, 6), (6, "D", None, None, 6, 6)]


def _history(storage: LakeStorage, table) -> list[tuple]:
    written = _rows(table_set(table).history.uri(storage), storage.delta_storage_options())
    return sorted(((r["k"], r["_operation"] if r["_operation"] == "D" else "U", r["a"], r["b"],
                    int(r["_sequence"].split(".")[0]),
                    None if r["valid_to_sequence"] is None else int(r["valid_to_sequence"].split(".")[0]))
                   for r in written), key=lambda r: (r[0], r[4]))


def _table(storage: LakeStorage, table) -> dict:
    rows = _rows(table_set(table).table.uri(storage), storage.delta_storage_options())
    return {r["k"]: (r["a"], r["b"]) for r in rows}


@pytest.mark.parametrize("together", [True, False], ids=["one run", "two runs"])
def test_the_history_across_a_truncate(storage: LakeStorage, spark: SparkSession, together: bool) -> None:
    table = declared(ignore_nulls=False, track_except=False, partitioned=False)
    prefix = table.sources[0].prefix
    for number, batch in enumerate([FIRST, SECOND, LATE]):
        storage.put_bytes(f"{prefix}f{number}.csv", "\n".join([HEADER, *map(_line, batch), ""]).encode())
        if number == 2 or not (together and number == 0):
            apply_pending(table, storage, spark, f"run-{number}")
        if number == 1:
            assert _table(storage, table) == {A: ("A2", None)}
            assert _history(storage, table) == HISTORY
    assert _table(storage, table) == {A: ("A2", None)}
    assert _history(storage, table) == AFTER_LATE


#: two truncates, in two files: `a` is back between them, `d` (4) only after the second
TWICE = [[Change(None, "T", None, None, 6), Change(A, "U", "A2", None, 8)],
         [Change(None, "T", None, None, 10), Change(D, "U", "D", None, 12)]]
TWICE_HISTORY = [
    (A, "U", "A", None, 1, 6), (A, "D", None, None, 6, 6), (A, "U", "A2", None, 8, 10), (A, "D", None, None, 10, 10),
    (B, "U", "B", None, 1, 6), (B, "D", None, None, 6, 6),
    (Z, "U", "Z", None, 1, 2), (Z, "D", None, None, 2, 2),
    (D, "U", "D", None, 12, None),
]


def test_the_model_deletes_at_each_truncate_of_a_run() -> None:
    for runs in ([FIRST, *TWICE], [FIRST, TWICE[0] + TWICE[1]], [FIRST + TWICE[0] + TWICE[1]]):
        model = _model(runs)
        assert model.table == {D: Change(D, "U", "D", None, 12)}
        assert model.history() == TWICE_HISTORY


@pytest.mark.parametrize("runs", [[[0], [1], [2]], [[0], [1, 2]], [[0, 1, 2]]],
                         ids=["each file alone", "the truncates together", "one run"])
def test_each_truncate_of_a_run_closes_what_was_live_before_it(storage: LakeStorage, spark: SparkSession,
                                                               runs: list[list[int]]) -> None:
    """Two truncates applied in one run give the history they give in two: a key live before the
    older one is deleted there, not at the newer one, and a key back between them is deleted again."""
    table = declared(ignore_nulls=False, track_except=False, partitioned=False)
    prefix = table.sources[0].prefix
    batches = [FIRST, *TWICE]
    for number, files in enumerate(runs):
        for index in files:
            storage.put_bytes(f"{prefix}f{index}.csv", "\n".join([HEADER, *map(_line, batches[index]), ""]).encode())
        apply_pending(table, storage, spark, f"run-{number}")
    assert _table(storage, table) == {D: ("D", None)}
    assert _history(storage, table) == TWICE_HISTORY


FIRST_LOAD = "1,A\n2,B\n3,C\n"
SECOND_LOAD = "2,B\n3,C\n"  # 1 is not in it
LATER = "U,1,A2\n"  # 1 again, newer than the second load


@pytest.mark.parametrize("together", [True, False], ids=["one run", "two runs"])
def test_the_history_across_a_full_load(storage: LakeStorage, spark: SparkSession, together: bool) -> None:
    """A key missing from a full load, with a newer change in the same run, has its delete at the
    load's base, as it has when the change comes in a later run."""
    table = loaded_table("loads", ["name STRING"])
    load_load_change(storage, spark, table, FIRST_LOAD, SECOND_LOAD, LATER, together)
    options = storage.delta_storage_options()
    tables = table_set(table)
    rows = DeltaTable(tables.table.uri(storage), storage_options=options).to_pyarrow_table().to_pylist()
    assert {r["id"]: r["name"] for r in rows} == {1: "A2", 2: "B", 3: "C"}
    written = sorted(_rows(tables.history.uri(storage), options), key=lambda r: (r["id"], r["_sequence"]))
    one = [r for r in written if r["id"] == 1]
    assert [(r["_operation"], r["name"], r["is_current"]) for r in one] == \
        [("L", "A", False), ("D", None, False), ("U", "A2", True)]
    loaded, deleted, again = one
    assert loaded["valid_to_sequence"] == deleted["_sequence"] == deleted["valid_to_sequence"]
    assert deleted["_sequence"] < again["_sequence"]
    assert deleted["_source_file"] == f"raw/{table.name}/fullload/v2/LOAD00000001.csv"
    # 2 and 3: each load's row a version, no delete
    assert [(r["id"], r["_operation"]) for r in written if r["id"] != 1] == [(2, "L"), (2, "L"), (3, "L"), (3, "L")]
    assert deleted["_sequence"] < min(r["_sequence"] for r in written if r["id"] == 2 and r["name"] == "B"
                                      and r["_source_file"].endswith("v2/LOAD00000001.csv"))


@pytest.mark.parametrize("together", [True, False], ids=["one run", "two runs"])
def test_two_full_loads_give_the_history_in_one_run_they_give_in_two(storage: LakeStorage, spark: SparkSession,
                                                                     together: bool) -> None:
    """The older of two full loads applied in one run is a snapshot too: its rows are versions and
    its deletes are in the history, as when each load has a run of its own; the table takes the newer."""
    table = loaded_table("loads", ["name STRING"])
    storage.put_bytes(f"raw/{table.name}/fullload/v1/LOAD00000001.csv", b"1,A\n2,B\n3,C\n")
    if not together:
        apply_pending(table, storage, spark, "run-1")
    storage.put_bytes(f"raw/{table.name}/fullload/v2/LOAD00000001.csv", b"2,B\n3,C2\n5,E\n")
    apply_pending(table, storage, spark, "run-2")
    options = storage.delta_storage_options()
    tables = table_set(table)
    rows = DeltaTable(tables.table.uri(storage), storage_options=options).to_pyarrow_table().to_pylist()
    assert {r["id"]: r["name"] for r in rows} == {2: "B", 3: "C2", 5: "E"}
    written = sorted(_rows(tables.history.uri(storage), options), key=lambda r: (r["id"], r["_sequence"]))
    first, second = (f"raw/{table.name}/fullload/v{n}/LOAD00000001.csv" for n in (1, 2))
    assert [(r["id"], r["_operation"], r["name"], r["_source_file"], r["is_current"]) for r in written] == [
        (1, "L", "A", first, False), (1, "D", None, second, False),
        (2, "L", "B", first, False), (2, "L", "B", second, True),
        (3, "L", "C", first, False), (3, "L", "C2", second, True),
        (5, "L", "E", second, True)]
    for version, following in zip(written, written[1:]):
        if version["id"] == following["id"] and version["_operation"] != "D":
            assert version["valid_to_sequence"] == following["_sequence"], version
