"""Nightly maintenance compacts and vacuums, the table reads the same afterwards, and
vacuum never breaks the time-travel window (LAKE_TIME_TRAVEL_HOURS)."""

import datetime as dt
import json
import os

import dagster as dg
import numpy as np
import pytest
from typer.testing import CliRunner

from lake_assets.resources.rules import LakeRules
from lake_assets.settings import LakeSettings
from lake_assets.cli import app
from lake_assets.core.errors import UsageError
from lake_assets.core.formats import iceberg_maintenance
from lake_assets.core.formats.delta import file_ranges, open_table
from lake_assets.core.lock import LockOwner, TableLocked, table_lock
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.core import registry
from lake_assets.jobs.maintenance import cluster_by, compact_and_vacuum, needs_clustering
from lake_assets_tests.helpers.insurance_tables import INSURANCE


def test_compact_and_vacuum_keeps_rows_and_reduces_files(storage: LakeStorage, spark) -> None:
    uri = INSURANCE.uri(storage)
    for start in range(0, 50, 10):
        spark.range(start, start + 10).selectExpr("CAST(id AS INT) AS policy_id").write.format("delta") \
            .mode("append").save(uri)
    before = open_table(storage, INSURANCE)
    files_before = len(before.file_uris())
    resource = StorageResource(bucket=storage.bucket, home=storage.home)
    with dg.build_op_context(resources={"storage": resource, "rules": LakeRules()}) as context:
        compact_and_vacuum(context)
    after = open_table(storage, INSURANCE)
    assert len(after.file_uris()) < files_before
    assert sorted(r["policy_id"] for r in spark.read.format("delta").load(uri).collect()) == list(range(50))
    assert any(h["operation"] == "OPTIMIZE" for h in after.history())


def test_maintenance_waits_for_the_writer_of_the_table(storage: LakeStorage, spark) -> None:
    spark.range(0, 10).selectExpr("CAST(id AS INT) AS policy_id").write.format("delta").save(INSURANCE.uri(storage))
    resource = StorageResource(bucket=storage.bucket, home=storage.home)
    with dg.build_op_context(resources={"storage": resource, "rules": LakeRules()}, op_config={"lock_wait_seconds": 1}) as context, \
            table_lock(storage, "insurance", owner=LockOwner("apply-run", 1, "elsewhere")):
        with pytest.raises(TableLocked, match="apply-run"):
            compact_and_vacuum(context)
        assert len(open_table(storage, INSURANCE).history()) == 1  # nothing compacted under the writer


def _age_commits(storage: LakeStorage, versions: range, hours: float) -> None:
    """Make commits look `hours` older: their commit time and the deletion time of the files they removed."""
    shift = int(hours * 3600 * 1000)
    for version in versions:
        key = f"{INSURANCE.prefix}/_delta_log/{version:020d}.json"
        actions = [json.loads(line) for line in storage.get_bytes(key)[0].decode().splitlines() if line.strip()]
        for action in actions:
            if "commitInfo" in action and "timestamp" in action["commitInfo"]:
                action["commitInfo"]["timestamp"] -= shift
            if "remove" in action and action["remove"].get("deletionTimestamp"):
                action["remove"]["deletionTimestamp"] -= shift
        storage.put_bytes(key, "\n".join(json.dumps(a) for a in actions).encode() + b"\n")


def test_vacuum_keeps_the_time_travel_window(storage: LakeStorage, spark, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = INSURANCE.uri(storage)
    for version in range(5):  # version v holds the keys 10v .. 10v+9
        spark.range(10 * version, 10 * version + 10).selectExpr("CAST(id AS INT) AS policy_id") \
            .write.format("delta").mode("overwrite").save(uri)
    _age_commits(storage, range(3), hours=3)  # versions 0-2 are three hours old, 3 and 4 new
    monkeypatch.setenv("LAKE_HOME", storage.home)
    monkeypatch.setenv("LAKE_S3_BUCKET", storage.bucket)
    monkeypatch.delenv("LAKE_S3_ENDPOINT", raising=False)
    monkeypatch.setenv("DAGSTER_HOME", os.environ.get("DAGSTER_HOME", ""))
    monkeypatch.setenv("LAKE_TIME_TRAVEL_HOURS", "1")
    resource = StorageResource(bucket=storage.bucket, home=storage.home)

    rules = LakeRules.from_settings(LakeSettings.from_env())  # the window the CLI's reader sees: 1 h
    with pytest.raises(UsageError, match="below the time-travel window LAKE_TIME_TRAVEL_HOURS=1 h"), \
            dg.build_op_context(resources={"storage": resource, "rules": rules}, op_config={"retention_hours": 0}) as refused:
        compact_and_vacuum(refused)
    with dg.build_op_context(resources={"storage": resource, "rules": rules}) as context:
        compact_and_vacuum(context)
        metadata = context.get_output_metadata("result")["insurance"]
    assert metadata["before"]["stored_files"] > metadata["after"]["stored_files"]  # versions 0 and 1 went
    assert metadata["after"]["oldest_readable_version"] == 2  # (vacuum itself commits: VACUUM START, END)

    def query(version: int) -> tuple[int, str]:
        result = CliRunner().invoke(app, ["query", "SELECT min(policy_id) AS low, count(*) AS n FROM insurance",
                                          "--version", str(version), "--format", "json"])
        return result.exit_code, result.output

    for version in (2, 3, 4):  # inside the window (2: the version current when it began)
        code, out = query(version)
        assert code == 0, out
        assert json.loads(out) == [{"low": 10 * version, "n": 10}]
    code, out = query(1)
    assert code == 2
    assert "version 1 is from" in out and "outside the LAKE_TIME_TRAVEL_HOURS=1 h window" in out
    assert "the oldest you can read is version 2" in out
    old = dt.datetime.fromtimestamp(open_table(storage, INSURANCE).history()[-2]["timestamp"] / 1000, dt.timezone.utc)
    result = CliRunner().invoke(app, ["query", "SELECT count(*) FROM insurance", "--as-of", old.isoformat()])
    assert result.exit_code == 2 and "version 1 is from" in result.output
    result = CliRunner().invoke(app, ["query", "SELECT count(*) FROM insurance VERSION AS OF 1 UNION ALL "
                                      "SELECT count(*) FROM insurance VERSION AS OF 3"])  # SQL: the same window
    assert result.exit_code == 2 and "outside the LAKE_TIME_TRAVEL_HOURS=1 h window" in result.output

    monkeypatch.setenv("LAKE_TIME_TRAVEL_HOURS", "5")  # a wider window cannot bring vacuumed files back
    code, out = query(1)
    assert code == 2 and "were removed by vacuum; the oldest you can read is version 2" in out


def test_compaction_sorts_a_clustered_table_by_its_key_only_when_needed(storage: LakeStorage, spark) -> None:
    uri = INSURANCE.uri(storage)
    for start in (30, 0, 20, 10, 5):  # five files; the last overlaps the second
        spark.range(start, start + 10).selectExpr("CAST(id AS INT) AS policy_id").write.format("delta") \
            .mode("append").save(uri)
    resource = StorageResource(bucket=storage.bucket, home=storage.home)
    with dg.build_op_context(resources={"storage": resource, "rules": LakeRules()}) as context:
        compact_and_vacuum(context)
    after = open_table(storage, INSURANCE)
    mins, maxs, _ = file_ranges(after, "policy_id")
    order = mins.argsort()
    assert (mins[order][1:] > maxs[order][:-1]).all()  # disjoint key ranges
    optimized = [h for h in after.history() if h["operation"] == "OPTIMIZE"]
    assert len(optimized) == 1
    assert sorted(r["policy_id"] for r in spark.read.format("delta").load(uri).collect()) == \
        sorted(list(range(0, 40)) + list(range(5, 15)))
    with dg.build_op_context(resources={"storage": resource, "rules": LakeRules()}) as again:
        compact_and_vacuum(again)  # clustered and compact already: nothing to do
    assert [h for h in open_table(storage, INSURANCE).history() if h["operation"] == "OPTIMIZE"] == optimized


def test_a_partitioned_table_is_compacted_not_clustered(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its files of one key range span its partitions (they always overlap), so sorting it by key
    every night would rewrite it every night; its history is not partitioned and stays clustered."""
    (tmp_path / "visits.yaml").write_text("""
name: visits
group: web
keys: [visit_id]
partition_by: [day]
columns:
  - {name: visit_id, type: BIGINT, nullable: false}
  - {name: day, type: DATE}
sources:
  - {prefix: raw/visits/, kind: cdc}
""")
    monkeypatch.setenv(registry.TABLES_DIR_VARIABLE, str(tmp_path))
    registry.declarations.cache_clear()
    try:
        clustered = cluster_by()
    finally:
        monkeypatch.undo()
        registry.declarations.cache_clear()
    assert "visits" not in clustered and clustered["visits_history"][0] == "visit_id"
    assert clustered["insurance"][0] == "policy_id"


def test_needs_clustering() -> None:
    big = 8 << 20
    assert not needs_clustering(np.array([0, 10]), np.array([9, 19]), np.array([big, big]), big)
    assert needs_clustering(np.array([0, 5]), np.array([9, 19]), np.array([big, big]), big)  # overlap
    assert needs_clustering(np.array([0, 10, 20]), np.array([9, 19, 29]), np.array([1, 1, big]), big)  # small files
    assert not needs_clustering(np.array([0]), np.array([9]), np.array([1]), big)


def test_iceberg_compaction_waits_for_the_writer_of_the_table(storage: LakeStorage, catalog, spark) -> None:
    """Compaction replaces partitions with the rows it read: never while a load holds the table."""
    from lake_assets.core.formats import iceberg
    from lake_assets.core.tables import TPCDS_WEB_SALES
    from lake_assets.resources.engine import SparkEngine
    from lake_assets.jobs.maintenance import maintain_iceberg
    from lake_assets.tpcds.load import ensure_table

    ensure_table(storage, "web_sales")
    for batch in range(2):  # two small files in one 365-day block: compaction would rewrite them
        spark.sql(f"INSERT INTO tpcds.web_sales (ws_sold_date_sk, ws_item_sk, ws_order_number) "
                  f"VALUES (2451000, {batch}, 1)")
    snapshots = len(iceberg.open_table(storage, TPCDS_WEB_SALES).snapshots())
    resource = StorageResource(bucket=storage.bucket, home=storage.home)
    with dg.build_op_context(resources={"storage": resource, "engine": SparkEngine()},
                             op_config={"lock_wait_seconds": 1}) as context, \
            table_lock(storage, TPCDS_WEB_SALES.write_lock, owner=LockOwner("tpcds-run", 1, "elsewhere")):
        with pytest.raises(TableLocked, match="tpcds-run"):
            maintain_iceberg(context)
    assert len(iceberg.open_table(storage, TPCDS_WEB_SALES).snapshots()) == snapshots  # nothing compacted
    with dg.build_op_context(resources={"storage": resource, "engine": SparkEngine()}) as context:
        maintain_iceberg(context)  # the writer gone: the block's two files become one
    assert len(iceberg_maintenance.data_files(iceberg.open_table(storage, TPCDS_WEB_SALES))) == 1
