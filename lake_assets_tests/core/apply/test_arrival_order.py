"""Sources ordered by arrival (`sequence_from: arrival`): files that name no time, applied in the
order they land. On the real embedded S3 and Sail; delta-rs reads the table and its history.

The case it is for: a dimension exported whole, again and again, under one name, its rows upserts
(no operation field: every row is an insert or update, as with DMS's `CdcInsertsOnly`), keys it
no longer holds kept (Hudi's upsert, where a full load would delete them).
"""

import uuid

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.apply.run import apply_pending
from lake_assets.core.declaration import DeclarationError, TableDeclaration
from lake_assets.core.registry import parse
from lake_assets.core.tables import table_set
from lake_assets.resources.storage import LakeStorage


def _declared(name: str) -> TableDeclaration:
    return parse(f"""
name: {name}
group: dims
keys: [id]
columns:
  - {{name: id, type: INT, nullable: false}}
  - {{name: label, type: STRING}}
sources:
  - {{prefix: raw/{name}/full/, kind: snapshot}}
  - {{prefix: raw/{name}/upserts/, kind: cdc, sequence_from: arrival, delimiter: "|", suffix: .dat}}
""", "test")


def _rows(storage: LakeStorage, uri: str) -> list[dict]:
    return DeltaTable(uri, storage_options=storage.delta_storage_options()).to_pyarrow_table().to_pylist()


def _table(storage: LakeStorage, declared: TableDeclaration) -> dict[int, str]:
    return {r["id"]: r["label"] for r in _rows(storage, table_set(declared).table.uri(storage))}


def test_files_without_a_time_apply_in_the_order_they_arrive(storage: LakeStorage, spark: SparkSession) -> None:
    name = f"item_{uuid.uuid4().hex[:6]}"
    declared = _declared(name)
    upserts = declared.sources[1].prefix
    storage.put_bytes(f"{upserts}item.dat", b"1|one\n2|two\n3|three\n")
    report = apply_pending(declared, storage, spark, "run-1")
    assert [(f.status, f.rows_applied) for f in report.files] == [("applied", 3)]

    # the same name delivered again: its rows are newer; a key it no longer holds keeps its row
    storage.put_bytes(f"{upserts}item.dat", b"1|uno\n2|two\n")
    apply_pending(declared, storage, spark, "run-2")
    assert _table(storage, declared) == {1: "uno", 2: "two", 3: "three"}

    # two files landing together follow each other in key order: b.dat's change of key 2 is the newer
    storage.put_bytes(f"{upserts}b.dat", b"2|dos (b)\n")
    storage.put_bytes(f"{upserts}a.dat", b"2|dos (a)\n4|four\n")
    report = apply_pending(declared, storage, spark, "run-3")
    by_name = {f.source_file.removeprefix(upserts): (f.rows_applied, f.rows_superseded) for f in report.files}
    assert by_name == {"a.dat": (1, 1), "b.dat": (1, 0)}
    assert _table(storage, declared) == {1: "uno", 2: "dos (b)", 3: "three", 4: "four"}

    # a full load landing with an upsert file: the changes apply on top of it
    storage.put_bytes(f"{declared.sources[0].prefix}LOAD00000001.csv", b"1,one again\n5,five\n")
    storage.put_bytes(f"{upserts}c.dat", b"5|cinco\n")
    apply_pending(declared, storage, spark, "run-4")
    assert _table(storage, declared) == {1: "one again", 5: "cinco"}

    # the history holds every version, in the order the files arrived
    history = sorted(_rows(storage, table_set(declared).history.uri(storage)), key=lambda r: r["_sequence"])
    assert [(r["label"], r["_operation"]) for r in history if r["id"] == 2] == [
        ("two", "I"), ("two", "I"), ("dos (a)", "I"), ("dos (b)", "I"), (None, "D")]


def test_arrival_and_a_sequence_column_are_one_too_many() -> None:
    with pytest.raises(DeclarationError, match="sequence_from: arrival orders a CDC source's files, sequence_by"):
        parse("""
name: bad
group: dims
keys: [id]
sequence_by: version
columns:
  - {name: id, type: INT}
  - {name: version, type: BIGINT}
sources:
  - {prefix: raw/bad/, kind: cdc, sequence_from: arrival}
""", "bad.yaml")
