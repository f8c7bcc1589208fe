"""A wide CDC batch is applied by rewriting the table: same rows and metrics as the MERGE."""

import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lake_assets.core.formats.delta import open_table, to_arrow
from lake_assets.insurance import merge
from lake_assets.insurance.pipeline import apply_pending
from lake_assets.resources.storage import LakeStorage
from lake_assets.core.tables import INSURANCE
from lake_assets_tests.conftest import DATA, make_storage

FULL = "fullload/full-load.csv"
CDC = ("cdcload/20240401-090000000.csv", "cdcload/20240402-090000000.csv")
EXTRA = ("I,900001,2025-01-31,Urban,CA,West,10,Retail,N,Y\n"  # new key
         "D,900002,,,,,,,,\n"                                 # delete of an absent key: no-op
         "U,900003,2025-02-28,Urban,CA,West,11,Retail,Y,N\n"  # update of an absent key: insert
         "U,100463,2025-03-31,Urban,CA,West,12,Retail,Y,Y\n")

ORIGINAL = {name: getattr(merge, name) for name in ("merge_changes", "rewrite_changes")}


def _apply(storage: LakeStorage, spark: SparkSession, monkeypatch: pytest.MonkeyPatch, rewrite: bool):
    monkeypatch.setattr(merge, "REWRITE_MIN_ROWS", 0 if rewrite else 10**12)
    monkeypatch.setattr(merge, "REWRITE_FRACTION", 0.0 if rewrite else 1e12)
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


def test_rewrite_matches_merge(storage: LakeStorage, spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    other = make_storage(storage.endpoint_url, Path(storage.home), f"t-{uuid.uuid4().hex[:12]}")
    merged, merged_rows, merge_calls = _apply(storage, spark, monkeypatch, rewrite=False)
    rewritten, rewritten_rows, rewrite_calls = _apply(other, spark, monkeypatch, rewrite=True)
    assert merge_calls == ["merge_changes"] and rewrite_calls == ["rewrite_changes"]
    assert rewritten_rows.equals(merged_rows)
    key = [(c.operation, c.inserted, c.updated, c.deleted, c.rows_after) for c in merged.commits]
    assert key == [(c.operation, c.inserted, c.updated, c.deleted, c.rows_after) for c in rewritten.commits]
    assert (rewritten.rows_before, rewritten.rows_after) == (merged.rows_before, merged.rows_after)
    assert rewritten.total("inserted") >= 2 and rewritten.total("deleted") >= 1 and rewritten.total("updated") >= 1


def test_wide_batches_choose_the_rewrite() -> None:
    assert not merge.prefers_rewrite(10, 25)
    assert merge.prefers_rewrite(100_000, 1_000_000)
    assert not merge.prefers_rewrite(50_000, 10_000_000)
