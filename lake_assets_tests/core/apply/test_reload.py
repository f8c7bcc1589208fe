"""Loading applied snapshots again (`lake backfill` of a declared table): each object as of the stamp
it was applied with, so it brings back what the table lost and undoes no newer change. On the real
embedded S3, catalog and Sail; delta-rs and pyiceberg damage the table from outside (a row lost to
a mistaken delete), and read it back.
"""

import datetime as dt
import uuid

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.apply.plan import newest_snapshots, raw_files
from lake_assets.core.apply.run import apply_pending
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.formats import iceberg
from lake_assets.core.ledger import Ledger
from lake_assets.core.registry import parse
from lake_assets.core.tables import table_set
from lake_assets.declared.checks import history_matches_table
from lake_assets.resources.storage import LakeStorage

FIRST, SECOND = dt.date(2024, 4, 1), dt.date(2024, 4, 2)


def _declared(name: str, table_format: str, partition: bool = True) -> TableDeclaration:
    scope = ", partition: day" if partition else ""
    return parse(f"""
name: {name}
group: reload
format: {table_format}
keys: [id]
columns:
  - {{name: id, type: BIGINT, nullable: false}}
  - {{name: day, type: DATE}}
  - {{name: amount, type: BIGINT}}
sources:
  - {{prefix: raw/{name}/days/, kind: snapshot{scope}}}
  - {{prefix: raw/{name}/cdc/, kind: cdc}}
""", "test")


def _table(storage: LakeStorage, declaration: TableDeclaration) -> dict[int, tuple]:
    curated = table_set(declaration).table
    if declaration.format.value == "iceberg":
        found = iceberg.open_table(storage, curated)
        assert found is not None
        rows = found.scan().to_arrow().to_pylist()
    else:
        rows = DeltaTable(curated.uri(storage), storage_options=storage.delta_storage_options()).to_pyarrow_table() \
            .to_pylist()
    return {r["id"]: (r["day"], r["amount"]) for r in rows}


def _lose(storage: LakeStorage, declaration: TableDeclaration, key: int) -> None:
    """A row lost to a mistaken delete from outside the lake (another writer of the table)."""
    curated = table_set(declaration).table
    if declaration.format.value == "iceberg":
        found = iceberg.open_table(storage, curated)
        assert found is not None
        found.delete(f"id == {key}")
    else:
        DeltaTable(curated.uri(storage), storage_options=storage.delta_storage_options()).delete(f"id = {key}")


def _reloadable(storage: LakeStorage, declaration: TableDeclaration) -> dict:
    entries = Ledger(storage).entries(declaration.table_name).to_pylist()
    latest = {(e["source_file"], e["source_etag"]): e for e in entries}
    return {value: sorted(f.key for f in files)
            for value, files in newest_snapshots(declaration, raw_files(declaration, storage), latest).items()}


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_a_partition_loaded_again_repairs_it_and_keeps_newer_changes(storage: LakeStorage, spark: SparkSession,
                                                                     table_format: str) -> None:
    name = f"rl_{uuid.uuid4().hex[:6]}"
    table = _declared(name, table_format)
    days, cdc = (s.prefix for s in table.sources)
    first = f"{days}day=2024-04-01/part-0.csv"  # no time in its name: stamped as of its arrival
    storage.put_bytes(first, b"1,2024-04-01,10\n2,2024-04-01,20\n3,2024-04-01,30\n")
    storage.put_bytes(f"{days}day=2024-04-02/20240402-120000000.csv", b"4,2024-04-02,40\n")
    apply_pending(table, storage, spark, "run-1")
    # the second day delivered again: its newest snapshot is the later one
    second = f"{days}day=2024-04-02/20240403-120000000.csv"
    storage.put_bytes(second, b"4,2024-04-02,41\n5,2024-04-02,50\n")
    # corrections newer than the first day's object: key 1 changed, key 2 deleted
    storage.put_bytes(f"{cdc}20240405-000000000.csv", b"U,1,2024-04-01,11\nD,2,2024-04-01,20\n")
    apply_pending(table, storage, spark, "run-2")
    expected = {1: (FIRST, 11), 3: (FIRST, 30), 4: (SECOND, 41), 5: (SECOND, 50)}
    assert _table(storage, table) == expected
    assert _reloadable(storage, table) == {FIRST: [first], SECOND: [second]}

    _lose(storage, table, 3)
    assert 3 not in _table(storage, table)
    report = apply_pending(table, storage, spark, "backfill", reload=[first])
    (again,) = report.files
    assert (again.source_file, again.status, again.rows_applied, again.rows_superseded) == (first, "applied", 1, 2)
    assert _table(storage, table) == expected  # key 3 back; key 1's correction and key 2's delete kept
    sequences = [e["source_sequence"] for e in Ledger(storage).entries(table.table_name).to_pylist()
                 if e["source_file"] == first]
    assert len(sequences) == 2 and sequences[0] == sequences[1]  # applied again as of its own stamp
    assert history_matches_table(table, storage, spark).passed

    # loaded again once more, into an intact partition: each row is the one it made, so nothing changes,
    # not even the history (it has every change of the object since it was first applied)
    history = DeltaTable(table_set(table).history.uri(storage), storage_options=storage.delta_storage_options())
    idle = apply_pending(table, storage, spark, "backfill-2", reload=[first])
    (again,) = idle.files
    assert (again.status, again.rows_applied, again.rows_superseded) == ("applied", 0, 3)
    assert idle.version_after == idle.version_before and _table(storage, table) == expected
    assert DeltaTable(table_set(table).history.uri(storage),
                      storage_options=storage.delta_storage_options()).version() == history.version()

    # nothing named: nothing pending, nothing loaded again
    assert apply_pending(table, storage, spark, "idle").files == []


def test_a_whole_table_snapshot_loaded_again(storage: LakeStorage, spark: SparkSession) -> None:
    name = f"rl_{uuid.uuid4().hex[:6]}"
    table = _declared(name, "delta", partition=False)
    days, cdc = (s.prefix for s in table.sources)
    load = f"{days}export.csv"  # stamped as of its arrival
    storage.put_bytes(load, b"1,2024-04-01,10\n2,2024-04-01,20\n")
    apply_pending(table, storage, spark, "run-1")
    assert _reloadable(storage, table) == {None: [load]}
    # the next full load, stamped as of its arrival too, shares the first one's time (a later part of it):
    # the newer wins, whatever the names' order
    later = f"{days}a-later-export.csv"
    storage.put_bytes(later, b"1,2024-04-01,10\n2,2024-04-01,21\n")
    apply_pending(table, storage, spark, "run-2")
    assert _reloadable(storage, table) == {None: [later]}
    storage.put_bytes(f"{cdc}20240402-000000000.csv", b"I,3,2024-04-02,30\n")
    apply_pending(table, storage, spark, "run-3")
    _lose(storage, table, 2)
    apply_pending(table, storage, spark, "backfill", reload=[later])
    # key 2 back; key 3, newer than the full load, is not deleted by it
    assert _table(storage, table) == {1: (FIRST, 10), 2: (FIRST, 21), 3: (SECOND, 30)}
