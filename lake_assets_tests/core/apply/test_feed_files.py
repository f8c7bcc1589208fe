"""The change feed derived from a commit's data files, on the engine (core/apply/feed.py): a
catch-up from the log gives the rows the run wrote, and a file a vacuum took is an error, not
an empty read (Sail reads a missing path as no rows: the commit's updates would become inserts)."""

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.apply import feed
from lake_assets.core.apply.run import apply_pending
from lake_assets.core.change_feed import FeedUnavailable, read_commit
from lake_assets.core.tables import LakeTable, table_set
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.accounts import accounts


def _feed_rows(storage: LakeStorage, table: LakeTable) -> list[tuple]:
    rows = DeltaTable(table.uri(storage), storage_options=storage.delta_storage_options()).to_pyarrow_table()
    return sorted((r["_commit_version"], r["_change_type"], r["id"], r["balance"]) for r in rows.to_pylist()
                  if r["_commit_version"] is not None)


def test_a_catch_up_from_the_log_matches_the_run_and_refuses_a_vacuumed_file(storage: LakeStorage,
                                                                              spark: SparkSession) -> None:
    table = accounts()
    name = table.name
    tables = table_set(table)
    prefix = table.sources[0].prefix
    storage.put_bytes(f"{prefix}20250101-000000000.csv", b"I,1,10\nI,2,20\nI,3,30\n")
    apply_pending(table, storage, spark, "run-0")
    storage.put_bytes(f"{prefix}20250101-000001000.csv", b"U,1,11\nD,2,20\nI,4,40\n")
    apply_pending(table, storage, spark, "run-1")

    scratch = LakeTable(f"{name}_rederived", f"curated/{name}_rederived", "a feed derived again from the log")
    feed.catch_up(spark, storage, tables.table, scratch, ["id"])
    assert _feed_rows(storage, scratch) == _feed_rows(storage, tables.changes) == [
        (1, "delete", 2, 20), (1, "insert", 4, 40), (1, "update_postimage", 1, 11), (1, "update_preimage", 1, 10)]

    removed = read_commit(storage, tables.table, 1).removed
    storage.get_client().delete_object(Bucket=storage.bucket, Key=f"{tables.table.prefix}/{removed[0]}")
    again = LakeTable(f"{name}_again", f"curated/{name}_again", "a feed derived after the vacuum")
    with pytest.raises(FeedUnavailable, match=f"{name} v1: its data file .* is gone"):
        feed.catch_up(spark, storage, tables.table, again, ["id"])
