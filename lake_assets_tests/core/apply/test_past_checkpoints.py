"""A declared table keeps working past the checkpoints its engine writes.

Sail 0.7.2 writes a Delta checkpoint every 10 commits and then cannot time-travel to most
versions before it; the change core read the version before each commit that way, so the 11th
run of every declared table failed, and so did every rerun. The core now reads the rows a commit
replaced from the files it removed, and `lake query ... VERSION AS OF n` reads version n from
its files (core/formats/delta_as_of.py). delta-rs is the second reader both are checked against.
"""

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.apply.run import apply_pending
from lake_assets.core.formats.delta_as_of import read_as_of
from lake_assets.core.tables import table_set
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.accounts import accounts

RUNS = 13  # versions 0-12: Sail's checkpoint at 10, the versions on both sides of it


def _rows(storage: LakeStorage, uri: str, version: int | None = None) -> list[dict]:
    return DeltaTable(uri, version=version, storage_options=storage.delta_storage_options()).to_pyarrow_table() \
        .to_pylist()


def test_runs_past_the_engines_checkpoint_keep_the_feed_and_history_true(storage: LakeStorage,
                                                                         spark: SparkSession) -> None:
    table = accounts()
    tables = table_set(table)
    prefix = table.sources[0].prefix
    storage.put_bytes(f"{prefix}20250101-000000000.csv", b"I,1,0\nI,2,0\n")
    apply_pending(table, storage, spark, "run-0")
    for run in range(1, RUNS):  # one update of key 1 per run: balance 0 -> 1 -> ... -> 12
        storage.put_bytes(f"{prefix}20250101-{run:06d}000.csv", f"U,1,{run}\n".encode())
        report = apply_pending(table, storage, spark, f"run-{run}")
        assert [c.version for c in report.commits] == [run]

    assert any(".checkpoint." in o["Key"] for o in storage.list_objects(f"{tables.table.prefix}/_delta_log/"))
    feed = _rows(storage, tables.changes.uri(storage))
    for version in range(1, RUNS):  # each commit's feed: key 1's pre- and post-image, nothing of key 2
        changes = sorted((r["_change_type"], r["balance"]) for r in feed
                         if r["_commit_version"] == version)
        assert changes == [("update_postimage", version), ("update_preimage", version - 1)], version
    history = sorted((r["balance"], r["valid_to_sequence"] is None) for r in _rows(storage, tables.history.uri(storage))
                     if r["id"] == 1)
    assert history == [(b, b == RUNS - 1) for b in range(RUNS)]


def test_every_version_reads_as_delta_rs_reads_it(storage: LakeStorage, spark: SparkSession) -> None:
    table = accounts()
    tables = table_set(table)
    prefix = table.sources[0].prefix
    for run in range(RUNS):  # a new key per run, and key 1 updated: versions differ in rows and values
        storage.put_bytes(f"{prefix}20250101-{run:06d}000.csv", f"I,{100 + run},{run}\nU,1,{run}\n".encode())
        apply_pending(table, storage, spark, f"run-{run}")
    for version in range(RUNS):
        ours = sorted(tuple(r) for r in read_as_of(spark, storage, tables.table, version).select("id", "balance")
                      .collect())
        expected = sorted((r["id"], r["balance"]) for r in _rows(storage, tables.table.uri(storage), version))
        assert ours == expected, version
