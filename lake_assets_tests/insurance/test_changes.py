"""`insurance_changes` (the derived change feed) and `insurance_history` (SCD2), end to end:
raw files on the real S3 server -> Sail commits -> feed and history derived from the log,
read back by delta-rs."""

import datetime as dt
import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from lake_assets.core import change_feed
from lake_assets.core.apply import cluster, commit as merge, feed as engine_feed, history as scd2, run as apply_run
from lake_assets.core.apply.resolve import table_columns
from lake_assets.core.formats.delta import file_ranges, open_table, to_arrow
from lake_assets.core.sequence import origin
from lake_assets_tests.helpers.insurance_tables import INSURANCE, INSURANCE_CHANGES, INSURANCE_HISTORY
from lake_assets.core.registry import declaration
from lake_assets_tests.helpers.insurance_tables import DATA_COLUMN_NAMES
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.changes import assert_history_invariants, history_versions, replay
from lake_assets_tests.insurance.test_pipeline import CDC_1, CDC_2, FULL, cdc, full_load, put, row, run, table

DECLARED = declaration("insurance")



def read_changes(storage: LakeStorage, start: int, end: int | None = None) -> pa.Table:
    return change_feed.read(storage, INSURANCE, INSURANCE_CHANGES, "policy_id", start, end)


def catch_up(storage: LakeStorage, spark: SparkSession) -> change_feed.FeedReport:
    return engine_feed.catch_up(spark, storage, INSURANCE, INSURANCE_CHANGES, ["policy_id"])


FEED_FIELDS = ["_change_type", "_commit_version", "policy_id", "insured_value", "flood_coverage"]


def feed(storage: LakeStorage) -> list[tuple]:
    """The stored feed, in version, key, change order: (change, version, key, value, flood)."""
    rows = change_feed.read(storage, INSURANCE, INSURANCE_CHANGES, "policy_id", 0)
    stored = to_arrow(open_table(storage, INSURANCE_CHANGES))
    first = to_arrow(open_table(storage, INSURANCE, 0))  # the first commit's feed: its files, not copied
    assert 0 not in stored["_commit_version"].to_pylist()
    assert rows.num_rows == stored.num_rows + first.num_rows  # the rest was stored
    return [tuple(r[c] for c in FEED_FIELDS) for r in rows.to_pylist()]


@pytest.fixture(params=["narrow", "rewrite"])
def strategy(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both commit strategies: the feed is the same, whichever one made the commit."""
    monkeypatch.setattr(merge, "REWRITE_FRACTION", 0.0 if request.param == "rewrite" else float("inf"))
    return request.param


def test_a_batch_of_inserts_updates_and_deletes_gives_exact_feed_rows(
        storage: LakeStorage, spark: SparkSession, strategy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # a run derives no feed from its commits' files: it reads back none of the files it wrote, and of
    # the files a commit replaced only those rows (the pre-images), once per commit
    monkeypatch.setattr(engine_feed, "commit_files", _fail)
    replaced: list[int] = []

    def replaced_rows(spark, storage, table, version):  # the core's, recorded
        replaced.append(version)
        return _replaced_rows(spark, storage, table, version)

    monkeypatch.setattr(apply_run, "replaced_rows", replaced_rows)
    put(storage, FULL, full_load(row(1, 100), row(2, 200), row(3, 300)))
    run(storage, spark)
    put(storage, CDC_1, cdc(f"I,{row(4, 400)}", f"U,{row(2, 222, flood='Y')}", "D,3,,,,,,,,"))
    report = run(storage, spark)
    monkeypatch.setattr(engine_feed, "commit_files", _commit_files)
    assert replaced == [1]  # the first commit replaced nothing

    assert feed(storage) == [
        ("insert", 0, 1, 100, "N"), ("insert", 0, 2, 200, "N"), ("insert", 0, 3, 300, "N"),
        # key 1 was carried over unchanged by the copy-on-write commit: no row for it
        ("update_preimage", 1, 2, 200, "N"), ("update_postimage", 1, 2, 222, "Y"),
        ("delete", 1, 3, 300, "N"),
        ("insert", 1, 4, 400, "N"),
    ]
    assert report.derived.feed.versions == [1]
    assert report.derived.feed.rows == {"insert": 1, "update_preimage": 1, "update_postimage": 1, "delete": 1}
    stored = to_arrow(open_table(storage, INSURANCE_CHANGES))
    commits = {h["version"]: h["timestamp"] for h in open_table(storage, INSURANCE).history()}
    for version, stamp in zip(stored["_commit_version"].to_pylist(), stored["_commit_timestamp"].to_pylist()):
        assert stamp == dt.datetime.fromtimestamp(commits[version] / 1000, dt.timezone.utc)
    # each commit's feed, written from the rows the run replaced and wrote, is what the log gives
    for version in (0, 1):
        written = change_feed.read(storage, INSURANCE, INSURANCE_CHANGES, "policy_id", version, version)
        assert written.num_rows and written.equals(change_feed.derive(storage, INSURANCE, "policy_id", version))
    # the feed's rows carry the table's columns, audit columns included
    preimage = stored.filter(pc.equal(stored["_change_type"], "update_preimage")).to_pylist()[0]
    assert preimage["_source_file"] == FULL and preimage["_sequence"] is not None

    full = f"{'0' * 23}.900000.{origin(FULL)}.0001"
    cdc1 = f"20240401090000000000000.000000.{origin(CDC_1)}.0001"
    assert [(k, frm, to, current, data and data["insured_value"]) for k, frm, to, current, data
            in history_versions(storage)] == [
        (1, f"{full}.0000000002", None, True, 100),
        (2, f"{full}.0000000003", f"{cdc1}.0000000002", False, 200), (2, f"{cdc1}.0000000002", None, True, 222),
        (3, f"{full}.0000000004", f"{cdc1}.0000000003", False, 300),
        (3, f"{cdc1}.0000000003", f"{cdc1}.0000000003", False, None),  # the delete: valid at no point
        (4, f"{cdc1}.0000000001", None, True, 400),
    ]
    assert_history_invariants(storage)
    assert replay(storage) == table(storage)


def test_a_failure_between_the_table_commit_and_the_feed_write_converges_on_rerun(
        storage: LakeStorage, spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    put(storage, FULL, full_load(row(1, 100), row(2, 200)))
    run(storage, spark)
    put(storage, CDC_1, cdc(f"U,{row(1, 111)}", "D,2,,,,,,,,"))

    def crash(*args, **kwargs):
        raise RuntimeError("killed after the table commit")

    monkeypatch.setattr(engine_feed, "_write", crash)
    with pytest.raises(RuntimeError, match="killed"):
        run(storage, spark)
    monkeypatch.undo()
    assert open_table(storage, INSURANCE).version() == 1  # committed ...
    assert change_feed.covered_through(storage, INSURANCE_CHANGES) == 0  # ... its feed is missing
    # `lake changes` derives the missing version from the log meanwhile, writing nothing
    assert [r["_change_type"] for r in read_changes(storage, 1).to_pylist()] == \
        ["update_preimage", "update_postimage", "delete"]

    report = run(storage, spark)  # nothing pending: the run only catches up
    assert report.derived.feed.versions == [1]
    assert [(c, v, k, value) for c, v, k, value, _ in feed(storage)] == [
        ("insert", 0, 1, 100), ("insert", 0, 2, 200),
        ("update_preimage", 1, 1, 100), ("update_postimage", 1, 1, 111), ("delete", 1, 2, 200),
    ]
    again = run(storage, spark)  # and once caught up, a run writes nothing more
    assert again.derived.feed.versions == [] and again.derived.history_version is None
    assert_history_invariants(storage)
    assert replay(storage) == table(storage)


def test_a_failure_before_the_history_write_converges_on_rerun(storage: LakeStorage, spark: SparkSession,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed after the table commit, before the history's: the ledger is written after the
    history, so the rerun applies the same changes again and the history gets each once."""
    put(storage, FULL, full_load(row(1, 100), row(2, 200)))
    run(storage, spark)
    put(storage, CDC_1, cdc(f"U,{row(1, 110)}", f"U,{row(1, 111)}", "D,2,,,,,,,,"))
    monkeypatch.setattr(scd2, "record", _fail)
    with pytest.raises(RuntimeError, match="killed"):
        run(storage, spark)
    monkeypatch.undo()
    assert open_table(storage, INSURANCE).version() == 1  # the table committed; the history is at its last commit
    assert len(history_versions(storage)) == 2
    run(storage, spark)
    expected = history_versions(storage)
    assert [(k, current, data and data["insured_value"]) for k, _, _, current, data in expected] == [
        (1, False, 100), (1, False, 110), (1, True, 111), (2, False, 200), (2, False, None)]
    stored = spark.read.format("delta").load(INSURANCE_HISTORY.uri(storage)).drop(*scd2.VALIDITY)
    scd2.record(spark, INSURANCE_HISTORY.uri(storage), open_table(storage, INSURANCE_HISTORY), stored,
                ["policy_id"], table_columns(DECLARED), True, 9, "int")  # recording the same changes again changes nothing
    assert history_versions(storage) == expected
    assert_history_invariants(storage)


def _fail(*args, **kwargs) -> None:
    raise RuntimeError("killed before the history write")


_commit_files = engine_feed.commit_files
_replaced_rows = apply_run.replaced_rows


def test_a_version_written_again_replaces_its_feed_rows(storage: LakeStorage, spark: SparkSession) -> None:
    """Writing a range twice (a concurrent or repeated catch-up) leaves one copy of its rows."""
    put(storage, FULL, full_load(row(1, 100)))
    run(storage, spark)
    put(storage, CDC_1, cdc(f"U,{row(1, 111)}"))
    run(storage, spark)
    rows = change_feed.derive(storage, INSURANCE, "policy_id", 1)
    change_feed._write(storage, INSURANCE_CHANGES, rows, 1, 1)
    assert len(feed(storage)) == 3


class _Crash:
    """The engine's feed write that fails its first call, then records the version ranges it writes."""

    def __init__(self, write) -> None:
        self.write, self.ranges = write, []

    def __call__(self, *args):
        start, end = args[-2:]
        self.ranges.append((start, end))
        if len(self.ranges) == 1:
            raise RuntimeError("killed before the feed write")
        return self.write(*args)


def test_a_restore_by_delta_rs_shows_in_the_feed(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, FULL, full_load(row(1, 100), row(2, 200)))
    run(storage, spark)
    put(storage, CDC_1, cdc(f"U,{row(1, 111)}", "D,2,,,,,,,,", f"I,{row(3, 300)}"))
    run(storage, spark)
    DeltaTable(INSURANCE.uri(storage), storage_options=storage.delta_storage_options()).restore(0)
    put(storage, CDC_2, cdc(f"U,{row(2, 222)}"))
    run(storage, spark)  # catches up the restore (v2) at its start, then its own commit (v3)

    assert [(c, v, k, value) for c, v, k, value, _ in feed(storage) if v >= 2] == [
        ("update_preimage", 2, 1, 111), ("update_postimage", 2, 1, 100), ("insert", 2, 2, 200),
        ("delete", 2, 3, 300),
        ("update_preimage", 3, 2, 200), ("update_postimage", 3, 2, 222),
    ]
    assert replay(storage) == table(storage)
    # the history follows the files the ledger applied (a bare delta-rs restore reverts none:
    # `lake restore` does, see test_restore.py), so CDC_1's versions stay in it
    assert [k for k, _, _, current, _ in history_versions(storage) if current] == [1, 2, 3]


def test_replaying_the_feed_up_to_each_version_gives_that_version(
        storage: LakeStorage, spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    put(storage, FULL, full_load(*(row(k, k) for k in range(1, 8))))
    run(storage, spark)
    monkeypatch.setattr(engine_feed, "_write", crash_once := _Crash(engine_feed._write))
    put(storage, CDC_2, cdc(f"U,{row(4, 44)}"))
    with pytest.raises(RuntimeError):
        run(storage, spark)  # v1 is not in the feed, and v2, v3 follow before a run catches up
    # a catch-up writes one feed commit per version
    put(storage, CDC_1, cdc(f"U,{row(3, 33)}", "D,5,,,,,,,,", f"I,{row(9, 9)}"))
    run(storage, spark)
    put(storage, "raw/fullload/full-load-2.csv", full_load(*(row(k, k * 10) for k in (1, 2, 3, 9))))
    run(storage, spark)  # a snapshot: updates, and deletes for the keys it lacks
    assert crash_once.ranges[-3:] == [(1, 1), (2, 2), (3, 3)]
    for version in range(open_table(storage, INSURANCE).version() + 1):
        old = to_arrow(open_table(storage, INSURANCE, version=version)).select(DATA_COLUMN_NAMES).to_pylist()
        assert replay(storage, version) == {r["policy_id"]: r for r in old}
    assert_history_invariants(storage)


def test_a_compaction_changes_no_rows_and_adds_nothing_to_the_feed(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, FULL, full_load(row(1, 100), row(2, 200)))
    run(storage, spark)
    put(storage, CDC_1, cdc(f"I,{row(3, 300)}"))
    run(storage, spark)
    compacted = DeltaTable(INSURANCE.uri(storage), storage_options=storage.delta_storage_options())
    assert compacted.optimize.compact()["numFilesRemoved"] >= 2  # a commit that moves every row (v2)
    assert change_feed.derive(storage, INSURANCE, "policy_id", 2).num_rows == 0
    put(storage, CDC_2, cdc(f"U,{row(3, 333)}"))
    report = run(storage, spark)
    assert report.derived.feed.versions == [3]
    assert [(c, v, k) for c, v, k, _, _ in feed(storage) if v >= 2] == [
        ("update_preimage", 3, 3), ("update_postimage", 3, 3)]
    assert_history_invariants(storage)
    assert replay(storage) == table(storage)


def test_a_column_added_to_the_table_reaches_the_feed(storage: LakeStorage,
                                                                       spark: SparkSession) -> None:
    """Declared schema evolution (a new nullable column): older rows read it as NULL in the feed."""
    put(storage, FULL, full_load(row(1, 100), row(2, 200)))
    run(storage, spark)
    current = to_arrow(open_table(storage, INSURANCE))
    new = current.filter(pc.equal(current["policy_id"], 2)).set_column(0, "policy_id", pa.array([3], pa.int32()))
    new = new.append_column("risk_score", pa.array([7], pa.int32()))
    write_deltalake(INSURANCE.uri(storage), new, mode="append", schema_mode="merge",
                    storage_options=storage.delta_storage_options())
    report = catch_up(storage, spark)
    assert report.versions == [1]
    rows = read_changes(storage, 0).to_pylist()
    assert [(r["_change_type"], r["policy_id"], r["risk_score"]) for r in rows] == [
        ("insert", 1, None), ("insert", 2, None), ("insert", 3, 7)]


def test_a_history_on_the_commit_axis_is_started_again_from_the_table(storage: LakeStorage,
                                                                      spark: SparkSession) -> None:
    """A history an earlier release wrote (commit axis, `valid_from_version`) is replaced by
    the table's rows on the next run, which then records its own changes on the source axis."""
    put(storage, FULL, full_load(row(1, 100), row(2, 200)))
    run(storage, spark)
    old = to_arrow(open_table(storage, INSURANCE)).append_column("valid_from_version", pa.array([0, 0], pa.int64()))
    write_deltalake(INSURANCE_HISTORY.uri(storage), old, mode="overwrite", schema_mode="overwrite",
                    storage_options=storage.delta_storage_options())
    put(storage, CDC_1, cdc(f"U,{row(1, 111)}"))
    run(storage, spark)
    assert "valid_from_version" not in to_arrow(open_table(storage, INSURANCE_HISTORY)).column_names
    assert [(k, current, data["insured_value"]) for k, _, _, current, data in history_versions(storage)] == [
        (1, False, 100), (1, True, 111), (2, True, 200)]
    assert_history_invariants(storage)


def test_a_small_batch_rewrites_only_the_history_files_holding_its_keys(
        storage: LakeStorage, spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """The history is clustered by key, as the table is: its files hold disjoint key ranges,
    so a one-key batch replaces the one file holding that key and leaves the rest."""
    monkeypatch.setattr(cluster, "TARGET_FILE_ROWS", 5_000)
    keys = [k for k in range(1, 30_001) if k % 7]  # some keys absent
    random.Random(7).shuffle(keys)  # a file out of key order: the history is written sorted by key
    put(storage, FULL, full_load(*(row(k, k) for k in keys)))
    run(storage, spark)
    written = open_table(storage, INSURANCE_HISTORY)
    mins, maxs, _ = file_ranges(written, "policy_id")
    order = np.argsort(mins)
    assert len(mins) >= 4 and bool(np.all(mins[order][1:] > maxs[order][:-1]))  # disjoint key ranges
    put(storage, CDC_1, cdc(f"U,{row(15_000, 1)}"))
    run(storage, spark)
    commit = open_table(storage, INSURANCE_HISTORY).history(1)[0]
    metrics = commit["operationMetrics"]
    assert metrics.get("num_removed_files", metrics.get("numRemovedFiles")) == 1, commit
    assert_history_invariants(storage)


def test_the_first_commits_feed_is_read_from_its_files_until_a_vacuum_could_take_them(
        storage: LakeStorage, spark: SparkSession) -> None:
    """The full load's feed is not copied: `lake changes` reads version 0's files as inserts;
    once those files leave the current version, maintenance stores the same rows."""
    put(storage, FULL, full_load(row(1, 100), row(2, 200)))
    report = run(storage, spark)
    assert report.derived.feed.versions == [0] and report.derived.feed.rows["insert"] == 2
    assert to_arrow(open_table(storage, INSURANCE_CHANGES)).num_rows == 0  # nothing copied
    first = read_changes(storage, 0, 0)
    assert [(r["_change_type"], r["_commit_version"], r["policy_id"], r["insured_value"]) for r in first.to_pylist()] \
        == [("insert", 0, 1, 100), ("insert", 0, 2, 200)]
    assert change_feed.change_counts(storage, INSURANCE, INSURANCE_CHANGES, "policy_id") == {0: {"insert": 2}}
    assert not change_feed.keep_first_version(storage, INSURANCE, INSURANCE_CHANGES, "policy_id")  # files current

    put(storage, CDC_1, cdc(f"U,{row(1, 111)}", f"U,{row(2, 222)}"))
    run(storage, spark)  # replaces the file version 0 added
    assert change_feed.keep_first_version(storage, INSURANCE, INSURANCE_CHANGES, "policy_id")
    assert not change_feed.keep_first_version(storage, INSURANCE, INSURANCE_CHANGES, "policy_id")  # stored once
    stored = to_arrow(open_table(storage, INSURANCE_CHANGES))
    assert sorted(stored.filter(pc.equal(stored["_commit_version"], 0))["policy_id"].to_pylist()) == [1, 2]
    assert read_changes(storage, 0, 0).equals(first)  # the same rows, now stored (not twice)
    assert change_feed.change_counts(storage, INSURANCE, INSURANCE_CHANGES, "policy_id") == \
        {0: {"insert": 2}, 1: {"update_preimage": 2, "update_postimage": 2}}
    assert replay(storage) == table(storage)
