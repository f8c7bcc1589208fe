"""Rollback, snapshot expiry, orphan removal and compaction on Iceberg tables in the REST catalog."""

import datetime as dt
import uuid

import pytest

from lake_assets.core.errors import UsageError
from lake_assets.core.formats import iceberg_maintenance as maintenance
from lake_assets.resources.engine import SparkEngine

FUTURE = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)


@pytest.fixture
def table_name(raw_star):
    """A small day-partitioned table written in five appends (five snapshots, small files)."""
    storage, _ = raw_star
    spark = SparkEngine().session(storage)
    name = f"tpcds.maint_{uuid.uuid4().hex[:8]}"
    spark.sql("CREATE DATABASE IF NOT EXISTS tpcds")
    spark.sql(f"CREATE TABLE {name} (k BIGINT, d DATE, v DECIMAL(7,2)) USING iceberg PARTITIONED BY (days(d))")
    for batch in range(5):
        spark.sql(f"INSERT INTO {name} SELECT id + {batch * 100}, DATE '2000-01-01' + CAST(id % 2 AS INT), "
                  f"CAST(id AS DECIMAL(7,2)) FROM range(100)")
    yield name
    storage.catalog().pyiceberg().purge_table(name)


def _load(storage, name):
    return storage.catalog().pyiceberg().load_table(name)


def _rows(spark, name):
    return sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {name}").collect())


def test_rollback_restores_a_snapshot(raw_star, table_name):
    storage, _ = raw_star
    spark = SparkEngine().session(storage)
    table = _load(storage, table_name)
    second = table.snapshots()[1].snapshot_id
    assert spark.sql(f"SELECT count(*) FROM {table_name}").collect()[0][0] == 500
    maintenance.rollback(table, second)
    assert _load(storage, table_name).current_snapshot().snapshot_id == second
    assert spark.sql(f"SELECT count(*) FROM {table_name}").collect()[0][0] == 200  # Sail sees the rollback
    # forward again to the newest snapshot (no longer an ancestor of the current one)
    newest = table.snapshots()[-1].snapshot_id
    maintenance.rollback(_load(storage, table_name), newest)
    assert spark.sql(f"SELECT count(*) FROM {table_name}").collect()[0][0] == 500
    with pytest.raises(UsageError, match="no snapshot"):
        maintenance.rollback(_load(storage, table_name), 12345)


def test_expire_remove_orphans_compact_keep_current_data(raw_star, table_name):
    storage, _ = raw_star
    spark = SparkEngine().session(storage)
    expected = _rows(spark, table_name)
    before = maintenance.table_stats(storage, _load(storage, table_name))
    assert before.snapshots == 5 and before.data_files >= 10 and before.rows == 500

    rewritten = maintenance.compact(spark, _load(storage, table_name), table_name, min_files=3)
    compacted = maintenance.table_stats(storage, _load(storage, table_name))
    assert rewritten == 2 and compacted.data_files == 2 and compacted.snapshots == 6
    assert _rows(spark, table_name) == expected

    expired = maintenance.expire_snapshots(_load(storage, table_name), FUTURE, retain_last=1)
    assert len(expired) == 5
    table = _load(storage, table_name)
    assert len(table.snapshots()) == 1
    orphans = maintenance.orphan_files(storage, table, FUTURE)
    assert len(orphans) >= before.data_files  # the old small files, their manifests and lists
    removed = maintenance.remove_orphan_files(storage, table, FUTURE)
    assert sorted(removed) == sorted(o["Key"] for o in orphans)
    after = maintenance.table_stats(storage, _load(storage, table_name))
    assert after.objects < before.objects and after.data_files == 2 and after.rows == 500
    assert maintenance.orphan_files(storage, _load(storage, table_name), FUTURE) == []
    assert _rows(spark, table_name) == expected  # current data still readable, by Sail ...
    assert sorted(tuple(r.values()) for r in _load(storage, table_name).scan().to_arrow().to_pylist()) == expected


def test_orphans_younger_than_the_grace_period_stay(raw_star, table_name):
    storage, _ = raw_star
    table = _load(storage, table_name)
    maintenance.expire_snapshots(table, FUTURE, retain_last=1)
    assert maintenance.remove_orphan_files(storage, _load(storage, table_name)) == []  # default grace: 1 hour


def test_compaction_folds_a_merge_on_read_tables_deletes_into_its_data_files(raw_star, table_name):
    """A merge-on-read MERGE leaves position delete files; compaction rewrites the table whole (Sail
    refuses a partition overwrite then), so no delete file is left, and every reader sees the same rows."""
    storage, _ = raw_star
    spark = SparkEngine().session(storage)
    with _load(storage, table_name).transaction() as transaction:
        transaction.set_properties({"write.merge.mode": "merge-on-read"})
    spark.sql(f"MERGE INTO {table_name} AS t USING (SELECT id * 7 AS k FROM range(20)) AS s ON t.k = s.k "
              "WHEN MATCHED AND s.k % 2 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET t.v = -1").collect()
    expected = _rows(spark, table_name)
    before = maintenance.table_stats(storage, _load(storage, table_name))
    assert before.delete_files > 0 and before.rows == len(expected) == 490

    rewritten = maintenance.compact(spark, _load(storage, table_name), table_name, min_files=3)
    after = maintenance.table_stats(storage, _load(storage, table_name))
    assert rewritten == 2 and after.delete_files == 0 and after.data_files == 2 and after.rows == 490
    assert _rows(spark, table_name) == expected
    assert sorted(tuple(r.values()) for r in _load(storage, table_name).scan().to_arrow().to_pylist()) == expected
