"""The commit strategies (core/apply/commit.py): a narrow replace over key ranges and a whole
rewrite give the same rows and metrics; both take only changes at least as new as the row; a
narrow batch into a clustered table rewrites only the files it touches; the files a write
makes hold disjoint key ranges (cluster.py)."""

import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lake_assets.core.apply import cluster, commit as committing
from lake_assets.core.apply.resolve import table_columns
from lake_assets.core.formats.delta import file_ranges, open_table, to_arrow
from lake_assets_tests.helpers.insurance_tables import INSURANCE
from lake_assets.core.registry import declaration
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.conftest import DATA, make_storage
from lake_assets_tests.helpers.insurance import apply_pending

DECLARED = declaration("insurance")

FULL = "fullload/full-load.csv"
CDC = ("cdcload/20240401-090000000.csv", "cdcload/20240402-090000000.csv")
EXTRA = ("I,900001,2025-01-31,Urban,CA,West,10,Retail,N,Y\n"  # new key
         "D,900002,,,,,,,,\n"                                 # delete of an absent key: no-op
         "U,900003,2025-02-28,Urban,CA,West,11,Retail,Y,N\n"  # update of an absent key: insert
         "U,100463,2025-03-31,Urban,CA,West,12,Retail,Y,Y\n")
COLUMNS = table_columns(DECLARED)


def _apply(storage: LakeStorage, spark: SparkSession, monkeypatch: pytest.MonkeyPatch, rewrite: bool):
    monkeypatch.setattr(committing, "REWRITE_FRACTION", 0.0 if rewrite else float("inf"))
    storage.put_bytes(f"raw/{FULL}", (DATA / FULL).read_bytes())
    apply_pending(storage, spark, "r1")
    for key in CDC:
        storage.put_bytes(f"raw/{key}", (DATA / key).read_bytes())
    storage.put_bytes("raw/cdcload/20240403-090000000.csv", EXTRA.encode())
    report = apply_pending(storage, spark, "r2")
    rows = to_arrow(open_table(storage, INSURANCE)).drop_columns(["_applied_at"]).sort_by("policy_id")
    return report, rows


def test_rewrite_matches_narrow_replace(storage: LakeStorage, spark: SparkSession,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    other = make_storage(storage.endpoint_url, Path(storage.home), f"t-{uuid.uuid4().hex[:12]}")
    merged, merged_rows = _apply(storage, spark, monkeypatch, rewrite=False)
    rewritten, rewritten_rows = _apply(other, spark, monkeypatch, rewrite=True)
    assert [c.strategy for c in merged.commits] == ["narrow"] and [c.strategy for c in rewritten.commits] == ["rewrite"]
    assert rewritten_rows.equals(merged_rows)
    key = [(c.operation, c.inserted, c.updated, c.deleted, c.rows_after) for c in merged.commits]
    assert key == [(c.operation, c.inserted, c.updated, c.deleted, c.rows_after) for c in rewritten.commits]
    assert (rewritten.rows_before, rewritten.rows_after) == (merged.rows_before, merged.rows_after)
    assert rewritten.total("inserted") >= 2 and rewritten.total("deleted") >= 1 and rewritten.total("updated") >= 1


def _rows(spark: SparkSession, changes: list[tuple[int, str, str, int | None]]) -> DataFrame:
    """Batch rows (key, operation, sequence, insured value) with the table's columns."""
    types = {c.name: c.type for c in DECLARED.columns} | {"_operation": "STRING", "_source_file": "STRING",
                                                          "_source_line": "BIGINT", "_applied_at": "TIMESTAMP",
                                                          "_sequence": "STRING"}
    given = ["policy_id", "_operation", "_sequence", "insured_value"]
    frame = spark.createDataFrame(changes, "policy_id INT, _operation STRING, _sequence STRING, insured_value INT")
    return frame.select(*[F.col(c) if c in given else F.lit(None).cast(types[c]).alias(c) for c in COLUMNS])


def _target(storage: LakeStorage) -> committing.DeltaTarget:
    return committing.DeltaTarget(INSURANCE.uri(storage), COLUMNS, ["policy_id"], True, "int")


def _create(spark: SparkSession, storage: LakeStorage, rows: DataFrame, count: int) -> None:
    committing.commit(spark, _target(storage), rows, committing.CommitPlan(committing.Strategy.CREATE, rows=count),
                      "test")


@pytest.mark.parametrize("strategy", [committing.Strategy.NARROW, committing.Strategy.REWRITE])
def test_both_strategies_take_only_changes_at_least_as_new_as_the_row(
        storage: LakeStorage, spark: SparkSession, strategy: committing.Strategy) -> None:
    """The engine-side guard of SEQUENCE BY (the resolve also filters before the commit)."""
    _create(spark, storage, _rows(spark, [(1, "I", "b", 10), (2, "I", "b", 20), (3, "I", "b", 30),
                                          (4, "I", "b", 40)]), 4)
    batch = _rows(spark, [(1, "U", "a", 11),   # older: ignored
                          (2, "D", "a", None),  # older delete: ignored
                          (3, "U", "b", 31),   # equal (a rerun): re-applied
                          (4, "D", "c", None),  # newer delete
                          (5, "I", "a", 50)])  # a new key
    where = committing.predicate("policy_id", [(1, 5)], "int") if strategy is committing.Strategy.NARROW else None
    committing.commit(spark, _target(storage), batch, committing.CommitPlan(strategy, where, 5), "test")
    rows = {r["policy_id"]: (r["insured_value"], r["_sequence"])
            for r in to_arrow(open_table(storage, INSURANCE)).to_pylist()}
    assert rows == {1: (10, "b"), 2: (20, "b"), 3: (31, "b"), 5: (50, "a")}


def test_key_ranges_cover_the_keys_and_the_files_holding_them(spark: SparkSession) -> None:
    mins, maxs = np.array([1, 101, 201, 301]), np.array([100, 200, 300, 400])
    keys = spark.createDataFrame([(k,) for k in (5, 150, 151, 500, 501, 502, 700)], "policy_id INT")
    # files 1 and 2 hold 5 and 150/151 (adjacent: one range); 500-502 and 700 are new keys past every
    # file: one range from the least to the greatest of them (it covers no file)
    assert committing.touched_ranges(spark, keys, mins, maxs) == [(1, 200), (500, 700)]
    assert committing.touched_ranges(spark, keys.where("policy_id <> 150"), mins, maxs, max_ranges=1) == [(1, 700)]
    assert committing.touched_ranges(spark, keys.where("false"), mins, maxs) == []
    assert committing.rows_within([(1, 200), (500, 700)], mins, maxs, np.array([10, 20, 30, 40])) == 30
    unbounded = np.iinfo(np.int64)  # a file without statistics may hold any key
    assert committing.touched_ranges(spark, keys.limit(1), np.array([unbounded.min]), np.array([unbounded.max])) == \
        [(unbounded.min, unbounded.max)]
    assert committing.predicate("policy_id", [(1, 200), (7, 7)], "int") == \
        "(policy_id BETWEEN 1 AND 200) OR (policy_id BETWEEN 7 AND 7)"
    assert committing.predicate("policy_id", [(unbounded.min, 5)], "int") == \
        "(policy_id BETWEEN -2147483648 AND 5)"  # an INT key's predicate stays within INT


def test_a_narrow_batch_rewrites_only_the_files_holding_its_keys(storage: LakeStorage, spark: SparkSession) -> None:
    """Clustered files (one per key block), a batch touching one block and a new key: one
    commit that removes just that block's file and leaves every other file in place."""
    for block in range(4):  # four appends: four files with disjoint key ranges
        _create(spark, storage, _rows(spark, [(block * 100 + k, "I", "a", k) for k in range(1, 51)]), 50)
    before = open_table(storage, INSURANCE)
    mins, maxs, counts = file_ranges(before, "policy_id")
    assert len(mins) == 4 and counts.sum() == 200
    batch = _rows(spark, [(210, "U", "b", -1), (220, "D", "b", None), (1000, "I", "b", 7)])
    plan = committing.choose(spark, _target(storage), before, batch, 1, 1)
    assert (plan.strategy, plan.where) == (committing.Strategy.NARROW,
                                           "(policy_id BETWEEN 201 AND 250) OR (policy_id BETWEEN 1000 AND 1000)")
    committing.commit(spark, _target(storage), batch, plan, "test")
    after = open_table(storage, INSURANCE)
    assert after.version() == before.version() + 1  # one atomic commit
    kept = set(pa.table(before.get_add_actions(flatten=True))["path"].to_pylist()) & \
        set(pa.table(after.get_add_actions(flatten=True))["path"].to_pylist())
    assert len(kept) == 3  # only the file of keys 201-250 was replaced
    assert after.history(limit=1)[0]["operation"] == "WRITE"  # replaceWhere: removes + adds, dataChange
    rows = {r["policy_id"]: r["insured_value"] for r in to_arrow(after).to_pylist()}
    assert len(rows) == 200 and rows[210] == -1 and 220 not in rows and rows[1000] == 7 and rows[211] == 11


def test_the_first_write_has_disjoint_key_ranges(storage: LakeStorage, spark: SparkSession,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows in random key order, written as many files: each file's key range is its own."""
    monkeypatch.setattr(cluster, "TARGET_FILE_ROWS", 2_000)
    keys = np.random.default_rng(7).permutation(np.arange(1, 20_001))
    _create(spark, storage, _rows(spark, [(int(k), "L", "a", int(k)) for k in keys]), 20_000)
    mins, maxs, counts = file_ranges(open_table(storage, INSURANCE), "policy_id")
    assert len(mins) >= 8 and counts.sum() == 20_000
    order = mins.argsort()
    assert (mins[order][1:] > maxs[order][:-1]).all()
