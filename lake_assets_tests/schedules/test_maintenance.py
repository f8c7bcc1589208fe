"""Nightly maintenance compacts and vacuums, and the table reads the same afterwards."""

import dagster as dg
import pytest

from lake_assets.core.formats.delta import open_table
from lake_assets.core.lock import LockOwner, TableLocked, table_lock
from lake_assets.resources.storage import LakeStorage
from lake_assets.schedules.maintenance import compact_and_vacuum
from lake_assets.core.tables import INSURANCE


def test_compact_and_vacuum_keeps_rows_and_reduces_files(storage: LakeStorage, spark) -> None:
    uri = INSURANCE.uri(storage)
    for start in range(0, 50, 10):
        spark.range(start, start + 10).selectExpr("CAST(id AS INT) AS policy_id").write.format("delta") \
            .mode("append").save(uri)
    before = open_table(storage, INSURANCE)
    files_before = len(before.file_uris())
    resource = LakeStorage(bucket=storage.bucket, home=storage.home)
    context = dg.build_op_context(resources={"storage": resource}, op_config={"retention_hours": 0})
    compact_and_vacuum(context)
    after = open_table(storage, INSURANCE)
    assert len(after.file_uris()) < files_before
    assert sorted(r["policy_id"] for r in spark.read.format("delta").load(uri).collect()) == list(range(50))
    assert any(h["operation"] == "OPTIMIZE" for h in after.history())


def test_maintenance_waits_for_the_writer_of_the_table(storage: LakeStorage, spark) -> None:
    spark.range(0, 10).selectExpr("CAST(id AS INT) AS policy_id").write.format("delta").save(INSURANCE.uri(storage))
    resource = LakeStorage(bucket=storage.bucket, home=storage.home)
    context = dg.build_op_context(resources={"storage": resource}, op_config={"lock_wait_seconds": 1})
    with table_lock(storage, "insurance", owner=LockOwner("apply-run", 1, "elsewhere")):
        with pytest.raises(TableLocked, match="apply-run"):
            compact_and_vacuum(context)
        assert len(open_table(storage, INSURANCE).history()) == 1  # nothing compacted under the writer
