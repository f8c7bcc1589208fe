"""A declared table partitioned by a column (`partition_by`), on the real embedded S3 and Sail.

A partitioned Delta table keeps its partition columns in the log, not in its data files, and
Sail's Parquet reader does not recover them from the folders: every read of data files the core
does itself (the rows a commit replaced, the change feed, time travel) takes them from the log
(core/formats/delta_files.py). delta-rs is the second reader the table is checked against, and
a small dict model is the expected table.
"""

import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core import change_feed, registry
from lake_assets.core.apply.restore import restore_declared
from lake_assets.core.apply.run import apply_pending
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.formats.delta_as_of import read_as_of
from lake_assets.core.registry import parse
from lake_assets.core.tables import table_set
from lake_assets.declared.checks import schema_matches_contract
from lake_assets.resources import duckdb_sandbox
from lake_assets.resources.storage import LakeStorage

#: One CDC file per run: key 1 moves from east to west and back to a region with a space, key 3
#: is deleted, keys 4 and 5 arrive, key 2 never changes (its file must keep its partition).
RUNS = [
    "I,1,east,10\nI,2,west,20\nI,3,east,30\n",
    "U,1,west,11\nD,3,east,30\nI,4,north east,40\n",
    "U,1,north east,12\nI,5,,50\n",  # key 5's region is NULL: Delta's default partition
]


def _declared(name: str, key_type: str, evolved: bool = False) -> TableDeclaration:
    return parse(_text(name, key_type, evolved), "test")


def _text(name: str, key_type: str, evolved: bool = False) -> str:
    added = "\n  - {name: note, type: STRING, since: 2}" if evolved else ""
    return f"""
name: {name}
group: accounts
keys: [id]
partition_by: [region]
columns:
  - {{name: id, type: {key_type}, nullable: false}}
  - {{name: region, type: STRING}}
  - {{name: balance, type: BIGINT}}{added}
sources:
  - {{prefix: raw/{name}/cdc/, kind: cdc}}
"""


def _delta(storage: LakeStorage, uri: str, version: int | None = None) -> DeltaTable:
    return DeltaTable(uri, version=version, storage_options=storage.delta_storage_options())


def _model(runs: list[str]) -> dict[int, tuple[str | None, int]]:
    """The expected table: key -> (region, balance) after `runs` (no two changes of a key in a file)."""
    rows: dict[int, tuple[str | None, int]] = {}
    for text in runs:
        for line in text.splitlines():
            op, key, region, balance = line.split(",")
            if op == "D":
                rows.pop(int(key), None)
            else:
                rows[int(key)] = (region or None, int(balance))
    return rows


@pytest.mark.parametrize("key_type", ["BIGINT", "STRING"])  # a narrow replace; a MERGE
def test_partitioned_table_feed_history_and_time_travel(storage: LakeStorage, spark: SparkSession,
                                                        key_type: str) -> None:
    name = f"accounts_{uuid.uuid4().hex[:6]}"
    table = _declared(name, key_type)
    tables = table_set(table)
    prefix = table.sources[0].prefix
    cast = int if key_type == "BIGINT" else str
    for run, text in enumerate(RUNS):
        storage.put_bytes(f"{prefix}20250101-{run:06d}000.csv", text.encode())
        report = apply_pending(table, storage, spark, f"run-{run}")
        assert [f.status for f in report.files] == ["applied"]

    delta = _delta(storage, tables.table.uri(storage))
    assert delta.metadata().partition_columns == ["region"]
    # Sail put the partition column last; the contract check accepts that, not a table partitioned otherwise
    assert [f.name for f in delta.schema().fields][-1] == "region" and schema_matches_contract(table, storage).passed
    unpartitioned = parse(_text(name, key_type).replace("partition_by: [region]\n", ""), "test")
    assert not schema_matches_contract(unpartitioned, storage).passed
    assert {p for p in delta.file_uris() if "/region=" not in p} == set()
    for version in range(len(RUNS)):
        expected = sorted((cast(k), r, b) for k, (r, b) in _model(RUNS[:version + 1]).items())
        second = sorted((r["id"], r["region"], r["balance"])
                        for r in _delta(storage, tables.table.uri(storage), version).to_pyarrow_table().to_pylist())
        ours = sorted(tuple(r) for r in read_as_of(spark, storage, tables.table, version)
                      .select("id", "region", "balance").collect())
        assert second == expected and ours == expected, version

    feed = change_feed.read(storage, tables.table, tables.changes, "id", 0).to_pylist()
    changes = sorted((r["_commit_version"], r["_change_type"], r["id"], r["region"], r["balance"]) for r in feed)
    key = cast
    assert changes == sorted([
        (0, "insert", key(1), "east", 10), (0, "insert", key(2), "west", 20), (0, "insert", key(3), "east", 30),
        (1, "update_preimage", key(1), "east", 10), (1, "update_postimage", key(1), "west", 11),
        (1, "delete", key(3), "east", 30), (1, "insert", key(4), "north east", 40),
        (2, "update_preimage", key(1), "west", 11), (2, "update_postimage", key(1), "north east", 12),
        (2, "insert", key(5), None, 50),
    ])
    history = _delta(storage, tables.history.uri(storage)).to_pyarrow_table().to_pylist()
    key_1 = sorted((r["region"], r["balance"], r["valid_to_sequence"] is None) for r in history if r["id"] == key(1))
    assert key_1 == [("east", 10, False), ("north east", 12, True), ("west", 11, False)]


def test_a_commit_across_many_partitions(storage: LakeStorage, spark: SparkSession) -> None:
    """Every key in a partition of its own, then all updated in one run: the rows the commit replaced
    are read from 120 partitions (one read per partition, unioned: the plan must stay shallow
    enough for Spark Connect, which refuses one nested ~45 deep)."""
    name = f"days_{uuid.uuid4().hex[:6]}"
    table = parse(_text(name, "BIGINT").replace("partition_by: [region]", "partition_by: [day]")
                  .replace("{name: region, type: STRING}", "{name: day, type: INT}"), "test")
    tables = table_set(table)
    prefix = table.sources[0].prefix
    days = range(120)
    storage.put_bytes(f"{prefix}20250101-000000000.csv", "".join(f"I,{d},{d},{d}\n" for d in days).encode())
    apply_pending(table, storage, spark, "run-0")
    storage.put_bytes(f"{prefix}20250101-000001000.csv", "".join(f"U,{d},{d},{d + 1}\n" for d in days).encode())
    report = apply_pending(table, storage, spark, "run-1")
    assert [f.status for f in report.files] == ["applied"]
    feed = change_feed.read(storage, tables.table, tables.changes, "id", 1).to_pylist()
    assert sorted((r["_change_type"], r["id"], r["day"], r["balance"]) for r in feed) == sorted(
        [("update_preimage", d, d, d) for d in days] + [("update_postimage", d, d, d + 1) for d in days])


def test_a_column_added_to_a_partitioned_table(storage: LakeStorage, spark: SparkSession) -> None:
    """A later contract version's column lands after the partition column in the log's schema;
    rows are written and read by name."""
    name = f"accounts_{uuid.uuid4().hex[:6]}"
    first, evolved = _declared(name, "BIGINT"), _declared(name, "BIGINT", evolved=True)
    tables = table_set(first)
    prefix = first.sources[0].prefix
    storage.put_bytes(f"{prefix}20250101-000000000.csv", RUNS[0].encode())
    apply_pending(first, storage, spark, "run-0")
    storage.put_bytes(f"{prefix}20250101-000001000.csv", b"U,2,east,21,moved\nI,6,west,60,new\n")
    report = apply_pending(evolved, storage, spark, "run-1")
    assert [f.status for f in report.files] == ["applied"] and schema_matches_contract(evolved, storage).passed

    rows = sorted((r["id"], r["region"], r["balance"], r["note"])
                  for r in _delta(storage, tables.table.uri(storage)).to_pyarrow_table().to_pylist())
    assert rows == [(1, "east", 10, None), (2, "east", 21, "moved"), (3, "east", 30, None), (6, "west", 60, "new")]
    feed = change_feed.read(storage, tables.table, tables.changes, "id", 1).to_pylist()
    assert sorted((r["_change_type"], r["id"], r["region"], r["note"]) for r in feed) == [
        ("insert", 6, "west", "new"), ("update_postimage", 2, "east", "moved"), ("update_preimage", 2, "west", None)]


def test_duckdb_reads_a_partitioned_table_through_the_query_sandbox(storage: LakeStorage, spark: SparkSession,
                                                                    tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The read-only query surface (DuckDB, allowed only the table's files) reads every partition,
    a value with a space and the NULL partition included."""
    name = f"accounts_{uuid.uuid4().hex[:6]}"
    (tmp_path / f"{name}.yaml").write_text(_text(name, "BIGINT"))
    monkeypatch.setenv(registry.TABLES_DIR_VARIABLE, str(tmp_path))
    registry.declarations.cache_clear()
    try:
        table = registry.declarations()[-1]
        prefix = table.sources[0].prefix
        for run, text in enumerate(RUNS):
            storage.put_bytes(f"{prefix}20250101-{run:06d}000.csv", text.encode())
            apply_pending(table, storage, spark, f"run-{run}")
        _, rows = duckdb_sandbox.query(storage, f"SELECT id, region, balance FROM {name}")
    finally:
        monkeypatch.delenv(registry.TABLES_DIR_VARIABLE)
        registry.declarations.cache_clear()
    assert sorted(rows, key=lambda r: r[0]) == sorted(((k, r, b) for k, (r, b) in _model(RUNS).items()),
                                                       key=lambda r: r[0])


@pytest.mark.parametrize("key_type", ["BIGINT", "STRING"])  # a clustered rewrite; a sorted one
def test_a_changed_partition_by_rewrites_the_table_at_its_next_commit(storage: LakeStorage, spark: SparkSession,
                                                                      key_type: str) -> None:
    """A table created unpartitioned, then declared `partition_by: [region]`: the next run's commit
    rewrites it partitioned, with the run's changes, in one commit whose feed holds only those
    changes; declared unpartitioned again, the next commit rewrites it without partitions."""
    name = f"moved_{uuid.uuid4().hex[:6]}"
    partitioned = _declared(name, key_type)
    plain = parse(_text(name, key_type).replace("partition_by: [region]\n", ""), "test")
    tables = table_set(plain)
    cast = int if key_type == "BIGINT" else str
    for run, (table, text) in enumerate(zip([plain, partitioned, plain], RUNS)):
        storage.put_bytes(f"{table.sources[0].prefix}20250101-{run:06d}000.csv", text.encode())
        report = apply_pending(table, storage, spark, f"run-{run}")
        assert [f.status for f in report.files] == ["applied"]
        assert [c.strategy for c in report.commits] == ["create" if run == 0 else "repartition"]
        delta = _delta(storage, tables.table.uri(storage))
        assert delta.metadata().partition_columns == list(table.partition_by)
        assert all(("/region=" in p) == bool(table.partition_by) for p in delta.file_uris())
        rows = sorted((r["id"], r["region"], r["balance"]) for r in delta.to_pyarrow_table().to_pylist())
        assert rows == sorted((cast(k), r, b) for k, (r, b) in _model(RUNS[:run + 1]).items()), run
        assert schema_matches_contract(table, storage).passed, run

    feed = change_feed.read(storage, tables.table, tables.changes, "id", 1).to_pylist()
    key = cast
    assert sorted((r["_commit_version"], r["_change_type"], r["id"], r["region"], r["balance"]) for r in feed) == \
        sorted([
            (1, "update_preimage", key(1), "east", 10), (1, "update_postimage", key(1), "west", 11),
            (1, "delete", key(3), "east", 30), (1, "insert", key(4), "north east", 40),
            (2, "update_preimage", key(1), "west", 11), (2, "update_postimage", key(1), "north east", 12),
            (2, "insert", key(5), None, 50),
        ])
    # a restore to the partitioned version brings its partitioning back with its rows
    restore_declared(storage, plain, 1, "restore-1")
    delta = _delta(storage, tables.table.uri(storage))
    assert delta.metadata().partition_columns == ["region"]
    assert sorted((r["id"], r["region"], r["balance"]) for r in delta.to_pyarrow_table().to_pylist()) == \
        sorted((cast(k), r, b) for k, (r, b) in _model(RUNS[:2]).items())
