"""Nightly maintenance compacts and vacuums, and the table reads the same afterwards."""

import dagster as dg
import numpy as np
import pytest

from lake_assets.core.formats.delta import file_ranges, open_table
from lake_assets.core.lock import LockOwner, TableLocked, table_lock
from lake_assets.resources.storage import LakeStorage
from lake_assets.schedules.maintenance import compact_and_vacuum, needs_clustering
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


def test_compaction_sorts_a_clustered_table_by_its_key_only_when_needed(storage: LakeStorage, spark) -> None:
    uri = INSURANCE.uri(storage)
    for start in (30, 0, 20, 10, 5):  # five files; the last overlaps the second
        spark.range(start, start + 10).selectExpr("CAST(id AS INT) AS policy_id").write.format("delta") \
            .mode("append").save(uri)
    resource = LakeStorage(bucket=storage.bucket, home=storage.home)
    context = dg.build_op_context(resources={"storage": resource}, op_config={"retention_hours": 0})
    compact_and_vacuum(context)
    after = open_table(storage, INSURANCE)
    mins, maxs, _ = file_ranges(after, "policy_id")
    order = mins.argsort()
    assert (mins[order][1:] > maxs[order][:-1]).all()  # disjoint key ranges
    optimized = [h for h in after.history() if h["operation"] == "OPTIMIZE"]
    assert len(optimized) == 1
    assert sorted(r["policy_id"] for r in spark.read.format("delta").load(uri).collect()) == \
        sorted(list(range(0, 40)) + list(range(5, 15)))
    compact_and_vacuum(context)  # clustered and compact already: nothing to do
    assert [h for h in open_table(storage, INSURANCE).history() if h["operation"] == "OPTIMIZE"] == optimized


def test_needs_clustering() -> None:
    big = 8 << 20
    assert not needs_clustering(np.array([0, 10]), np.array([9, 19]), np.array([big, big]), big)
    assert needs_clustering(np.array([0, 5]), np.array([9, 19]), np.array([big, big]), big)  # overlap
    assert needs_clustering(np.array([0, 10, 20]), np.array([9, 19, 29]), np.array([1, 1, big]), big)  # small files
    assert not needs_clustering(np.array([0]), np.array([9]), np.array([1]), big)
