"""The commit strategies: a narrow replace over key ranges and a whole rewrite give the same
rows and metrics; a narrow batch into a clustered table rewrites only the files it touches."""

import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from lake_assets.core.formats.delta import file_ranges, key_ranges, open_table, to_arrow
from lake_assets.insurance import merge
from lake_assets.insurance.contract import table_schema
from lake_assets_tests.helpers.insurance import apply_pending
from lake_assets.resources.storage import LakeStorage
from lake_assets.core.tables import INSURANCE
from lake_assets_tests.conftest import DATA, make_storage

FULL = "fullload/full-load.csv"
CDC = ("cdcload/20240401-090000000.csv", "cdcload/20240402-090000000.csv")
EXTRA = ("I,900001,2025-01-31,Urban,CA,West,10,Retail,N,Y\n"  # new key
         "D,900002,,,,,,,,\n"                                 # delete of an absent key: no-op
         "U,900003,2025-02-28,Urban,CA,West,11,Retail,Y,N\n"  # update of an absent key: insert
         "U,100463,2025-03-31,Urban,CA,West,12,Retail,Y,Y\n")

ORIGINAL = {name: getattr(merge, name) for name in ("replace_changes", "rewrite_changes")}


def _apply(storage: LakeStorage, spark: SparkSession, monkeypatch: pytest.MonkeyPatch, rewrite: bool):
    monkeypatch.setattr(merge, "REWRITE_FRACTION", 0.0 if rewrite else float("inf"))
    calls: list[str] = []
    for name, original in ORIGINAL.items():
        monkeypatch.setattr(merge, name, lambda *a, _o=original, _n=name: calls.append(_n) or _o(*a))
    storage.put_bytes(f"raw/{FULL}", (DATA / FULL).read_bytes())
    apply_pending(storage, spark, "r1")
    for key in CDC:
        storage.put_bytes(f"raw/{key}", (DATA / key).read_bytes())
    storage.put_bytes("raw/cdcload/20240403-090000000.csv", EXTRA.encode())
    report = apply_pending(storage, spark, "r2")
    rows = to_arrow(open_table(storage, INSURANCE)).drop_columns(["_applied_at"]).sort_by("policy_id")
    return report, rows, calls


def test_rewrite_matches_narrow_replace(storage: LakeStorage, spark: SparkSession,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    other = make_storage(storage.endpoint_url, Path(storage.home), f"t-{uuid.uuid4().hex[:12]}")
    merged, merged_rows, merge_calls = _apply(storage, spark, monkeypatch, rewrite=False)
    rewritten, rewritten_rows, rewrite_calls = _apply(other, spark, monkeypatch, rewrite=True)
    assert merge_calls == ["replace_changes"] and rewrite_calls == ["rewrite_changes"]
    assert [c.strategy for c in merged.commits] == ["narrow"] and [c.strategy for c in rewritten.commits] == ["rewrite"]
    assert rewritten_rows.equals(merged_rows)
    key = [(c.operation, c.inserted, c.updated, c.deleted, c.rows_after) for c in merged.commits]
    assert key == [(c.operation, c.inserted, c.updated, c.deleted, c.rows_after) for c in rewritten.commits]
    assert (rewritten.rows_before, rewritten.rows_after) == (merged.rows_before, merged.rows_after)
    assert rewritten.total("inserted") >= 2 and rewritten.total("deleted") >= 1 and rewritten.total("updated") >= 1


def test_batches_touching_most_rows_choose_the_rewrite() -> None:
    assert merge.choose(0, 0, table_exists=False) is merge.Strategy.CREATE
    assert merge.choose(25, 25) is merge.Strategy.REWRITE
    assert merge.choose(600_000, 1_000_000) is merge.Strategy.REWRITE
    assert merge.choose(300_000, 10_000_000) is merge.Strategy.NARROW


def _rows(changes: list[tuple[int, str, str, int | None]]) -> pa.Table:
    """Staged rows (key, operation, sequence, insured value) in the table's schema."""
    count = len(changes)
    columns = {name: pa.nulls(count, field.type) for name, field in zip(table_schema().names, table_schema())}
    columns.update({"policy_id": pa.array([c[0] for c in changes], pa.int32()),
                    "_operation": pa.array([c[1] for c in changes]), "_sequence": pa.array([c[2] for c in changes]),
                    "insured_value": pa.array([c[3] for c in changes], pa.int32())})
    return pa.table(columns, schema=table_schema())


STRATEGIES = {"replace_changes": lambda spark, uri, staged: merge.replace_changes(spark, uri, staged, [(1, 5)]),
              "rewrite_changes": merge.rewrite_changes}


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_both_strategies_take_only_changes_at_least_as_new_as_the_row(
        storage: LakeStorage, spark: SparkSession, strategy: str) -> None:
    """The engine-side guard of SEQUENCE BY (the pipeline also filters before staging)."""
    uri = INSURANCE.uri(storage)
    merge.create_from(spark, uri, merge.stage(storage, "staging/t/0.parquet", _rows(
        [(1, "I", "b", 10), (2, "I", "b", 20), (3, "I", "b", 30), (4, "I", "b", 40)])))
    batch = _rows([(1, "U", "a", 11),   # older: ignored
                   (2, "D", "a", None),  # older delete: ignored
                   (3, "U", "b", 31),   # equal (a rerun): re-applied
                   (4, "D", "c", None),  # newer delete
                   (5, "I", "a", 50)])  # a new key
    STRATEGIES[strategy](spark, uri, merge.stage(storage, "staging/t/1.parquet", batch))
    rows = {r["policy_id"]: (r["insured_value"], r["_sequence"]) for r in to_arrow(open_table(storage, INSURANCE)).to_pylist()}
    assert rows == {1: (10, "b"), 2: (20, "b"), 3: (31, "b"), 5: (50, "a")}


def test_key_ranges_cover_the_keys_and_the_files_holding_them() -> None:
    mins, maxs = np.array([1, 101, 201, 301]), np.array([100, 200, 300, 400])
    keys = np.array([5, 150, 151, 500, 501, 502, 700])
    # files 1 and 2 hold 5 and 150/151 (adjacent: one range); 500-502 and 700 are new keys
    assert key_ranges(keys, mins, maxs) == [(1, 200), (500, 502), (700, 700)]
    assert key_ranges(keys, mins, maxs, max_ranges=2) == [(1, 200), (500, 700)]  # the narrowest gap goes
    assert key_ranges(np.array([], np.int64), mins, maxs) == []
    assert merge.rows_within([(1, 200), (500, 700)], mins, maxs, np.array([10, 20, 30, 40])) == 30
    unbounded = np.iinfo(np.int64)  # a file without statistics may hold any key
    assert key_ranges(np.array([7]), np.array([unbounded.min]), np.array([unbounded.max])) == \
        [(unbounded.min, unbounded.max)]
    assert merge.predicate([(1, 200), (7, 7)]) == "(policy_id BETWEEN 1 AND 200) OR (policy_id BETWEEN 7 AND 7)"


def test_a_narrow_batch_rewrites_only_the_files_holding_its_keys(storage: LakeStorage, spark: SparkSession) -> None:
    """Clustered files (one per key block), a batch touching one block and a new key: one
    commit that removes just that block's file and leaves every other file in place."""
    uri = INSURANCE.uri(storage)
    for block in range(4):  # four appends: four files with disjoint key ranges
        merge.create_from(spark, uri, merge.stage(storage, f"staging/t/{block}.parquet", _rows(
            [(block * 100 + k, "I", "a", k) for k in range(1, 51)])))
    before = open_table(storage, INSURANCE)
    mins, maxs, counts = file_ranges(before, "policy_id")
    assert len(mins) == 4 and counts.sum() == 200
    batch = _rows([(210, "U", "b", -1), (220, "D", "b", None), (1000, "I", "b", 7)])
    ranges = key_ranges(np.array([210, 220, 1000]), mins, maxs)
    assert ranges == [(201, 250), (1000, 1000)]
    merge.replace_changes(spark, uri, merge.stage(storage, "staging/t/b.parquet", batch), ranges)
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
    """Staged sorted, one row group per engine partition: the engine's files have narrow,
    disjoint key ranges, but for one file per partition at most (a partition's last rows
    may share a file with another's first: measured, Sail 0.7.2)."""
    monkeypatch.setattr(merge, "PART_MIN_ROWS", 100)
    monkeypatch.setattr(merge, "TARGET_FILE_BYTES", 4096)  # many small files
    keys = np.random.default_rng(7).permutation(np.arange(1, 20_001))
    rows = _rows([(int(k), "L", "a", int(k)) for k in keys])
    merge.create_from(spark, INSURANCE.uri(storage), merge.stage_sorted(storage, "staging/t/", rows))
    mins, maxs, counts = file_ranges(open_table(storage, INSURANCE), "policy_id")
    assert len(mins) > 4 and counts.sum() == 20_000
    narrow = np.argsort(maxs - mins)[:len(mins) - (merge.ENGINE_PARTITIONS - 1)]  # without the widest
    mins, maxs = mins[narrow], maxs[narrow]
    order = mins.argsort()
    assert (mins[order][1:] > maxs[order][:-1]).all()
