"""Restoring `insurance` keeps the pipeline's memory true: a reverted full load stops
superseding late changes, the tombstones it replaced come back, and reapplying it gives
what a model of the files in sequence order gives."""

import datetime as dt

import pytest
from pyspark.sql import SparkSession

from lake_assets.core.formats.delta import current_version, open_table, to_arrow
from lake_assets.core.ledger import APPLIED, REVERTED, Ledger
from lake_assets_tests.helpers.insurance_tables import INSURANCE, INSURANCE_TOMBSTONES
from lake_assets_tests.helpers.insurance_tables import DATA_COLUMN_NAMES
from lake_assets_tests.helpers.insurance import IngestRules, apply_pending, approve_held, restore_insurance
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.changes import assert_history_invariants, history_versions

HEADER = ",".join(DATA_COLUMN_NAMES)
RULES = IngestRules(max_shrink=1.0)  # publish the shrinking snapshot without a hold
FULL, SNAPSHOT = "raw/fullload/a.csv", "raw/fullload/2024/04/10/b.csv"
C_OLD, C1, C_LATE = "raw/cdcload/20240331-090000000.csv", "raw/cdcload/20240401-090000000.csv", \
    "raw/cdcload/20240402-090000000.csv"


def row(key: int, value: int) -> str:
    return f"{key},2024-01-31,Urban,CA,West,{value},Retail,N,Y"


def values(storage: LakeStorage) -> dict[int, int]:
    table = to_arrow(open_table(storage, INSURANCE)).select(["policy_id", "insured_value"]).to_pylist()
    return {r["policy_id"]: r["insured_value"] for r in table}


def statuses(storage: LakeStorage) -> dict[str, str]:
    return {e["source_file"]: e["status"] for e in Ledger(storage).entries("insurance").to_pylist()}


def tombstones(storage: LakeStorage) -> dict[int, str]:
    return {t["policy_id"]: t["source_file"] for t in to_arrow(open_table(storage, INSURANCE_TOMBSTONES)).to_pylist()}


def test_a_reverted_full_load_stops_counting_and_reapplies_in_sequence(storage: LakeStorage,
                                                                      spark: SparkSession) -> None:
    storage.put_bytes(FULL, "\n".join([HEADER, *(row(k, k) for k in range(1, 5)), ""]).encode())
    apply_pending(storage, spark, "run-1", RULES)
    storage.put_bytes(C1, f"D,{row(2, 0)}\nU,{row(1, 10)}\n".encode())
    apply_pending(storage, spark, "run-2", RULES)
    good = current_version(storage, INSURANCE)
    assert values(storage) == {1: 10, 3: 3, 4: 4} and tombstones(storage) == {2: C1}
    storage.put_bytes(SNAPSHOT, f"{HEADER}\n{row(1, 100)}\n".encode())  # a snapshot as of 2024-04-10
    apply_pending(storage, spark, "run-3", RULES)
    assert values(storage) == {1: 100}
    assert tombstones(storage) == {2: SNAPSHOT, 3: SNAPSHOT, 4: SNAPSHOT}

    report = restore_insurance(storage, good, "restore-1")
    assert (report.restored_version, report.version_after, report.reverted) == (good, good + 2, [SNAPSHOT])
    assert (report.rows_before, report.rows_after) == (1, 3)
    assert values(storage) == {1: 10, 3: 3, 4: 4}
    assert tombstones(storage) == {2: C1}  # the snapshot's are gone, the delete it had replaced is back
    assert statuses(storage)[SNAPSHOT] == REVERTED

    # late changes: older than the reverted snapshot (which no longer supersedes them), and
    # one older than C1's delete of key 2 (which still does)
    storage.put_bytes(C_LATE, f"I,{row(5, 5)}\nU,{row(3, 33)}\n".encode())
    storage.put_bytes(C_OLD, f"I,{row(2, 2)}\n".encode())
    apply_pending(storage, spark, "run-4", RULES)
    assert values(storage) == {1: 10, 3: 33, 4: 4, 5: 5}
    assert statuses(storage)[SNAPSHOT] == REVERTED  # a plain run leaves it alone

    apply_pending(storage, spark, "run-5", RULES, reapply=True)
    # the model, every file in sequence order: a, C_OLD (I 2), C1 (D 2, U 1), C_LATE (I 5, U 3),
    # then the snapshot as of 04-10 (only key 1; everything older is deleted)
    assert values(storage) == {1: 100}
    assert statuses(storage) == {FULL: APPLIED, C1: APPLIED, SNAPSHOT: APPLIED, C_LATE: APPLIED, C_OLD: APPLIED}
    assert set(tombstones(storage)) == {2, 3, 4, 5}
    assert_history_invariants(storage)


def test_restoring_twice_follows_the_lineage(storage: LakeStorage, spark: SparkSession) -> None:
    storage.put_bytes(FULL, "\n".join([HEADER, row(1, 1), ""]).encode())
    apply_pending(storage, spark, "run-1", RULES)  # version 0
    storage.put_bytes(C1, f"I,{row(2, 2)}\n".encode())
    apply_pending(storage, spark, "run-2", RULES)  # version 1
    restore_insurance(storage, 0, "restore-1")  # version 2 = version 0
    assert statuses(storage)[C1] == REVERTED
    report = restore_insurance(storage, 1, "restore-2")  # version 3 = version 1: C1 is back
    assert report.reinstated == [C1] and statuses(storage)[C1] == APPLIED and values(storage) == {1: 1, 2: 2}
    report = restore_insurance(storage, 2, "restore-3")  # version 2 is version 0's content
    assert report.reverted == [C1] and values(storage) == {1: 1}
    started = dt.datetime.now(dt.timezone.utc)
    apply_pending(storage, spark, "run-3", RULES, reapply=True)
    assert values(storage) == {1: 1, 2: 2}
    assert Ledger(storage).entries("insurance").to_pylist()[-1]["recorded_at"] >= started


def test_a_restore_that_fails_before_the_ledger_converges_on_rerun(storage: LakeStorage, spark: SparkSession,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    storage.put_bytes(FULL, "\n".join([HEADER, row(1, 1), row(2, 2), ""]).encode())
    apply_pending(storage, spark, "run-1", RULES)  # version 0
    storage.put_bytes(C1, f"D,{row(2, 0)}\n".encode())
    apply_pending(storage, spark, "run-2", RULES)  # version 1
    assert tombstones(storage) == {2: C1}

    def fail(self, entries) -> None:
        raise OSError("S3 went away")

    with monkeypatch.context() as patch:
        patch.setattr(Ledger, "record", fail)
        with pytest.raises(OSError, match="S3 went away"):
            restore_insurance(storage, 0, "restore-1")
    assert values(storage) == {1: 1, 2: 2} and statuses(storage)[C1] == APPLIED  # committed, ledger not yet
    report = restore_insurance(storage, 0, "restore-2")
    assert report.reverted == [C1] and values(storage) == {1: 1, 2: 2} and tombstones(storage) == {}
    assert statuses(storage)[C1] == REVERTED
    apply_pending(storage, spark, "run-3", RULES, reapply=True)
    assert values(storage) == {1: 1} and statuses(storage)[C1] == APPLIED


def test_the_history_follows_the_files_a_restore_reverts_and_reinstates(storage: LakeStorage,
                                                                        spark: SparkSession) -> None:
    """The history is the history of the applied files: a restore takes a reverted file's
    versions out (and its keys' intervals back), restoring forward and reapplying put them back."""
    storage.put_bytes(FULL, "\n".join([HEADER, row(1, 1), row(2, 2), ""]).encode())
    apply_pending(storage, spark, "run-1", RULES)  # version 0
    before = history_versions(storage)
    storage.put_bytes(C1, f"U,{row(1, 10)}\nU,{row(1, 11)}\nD,{row(2, 0)}\nI,{row(3, 3)}\nD,{row(3, 0)}\n".encode())
    apply_pending(storage, spark, "run-2", RULES)  # version 1
    after = history_versions(storage)
    assert len(after) == len(before) + 5  # two versions of 1, the delete of 2, 3 inserted and deleted

    report = restore_insurance(storage, 0, "restore-1")  # version 2
    assert (report.history_before, report.history_after) == (7, 2) and history_versions(storage) == before
    assert_history_invariants(storage)
    restore_insurance(storage, 1, "restore-2")  # version 3: C1 reinstated
    assert history_versions(storage) == after
    assert_history_invariants(storage)
    restore_insurance(storage, 2, "restore-3")  # version 0's content again
    assert history_versions(storage) == before
    apply_pending(storage, spark, "run-3", RULES, reapply=True)
    assert history_versions(storage) == after and statuses(storage)[C1] == APPLIED
    assert_history_invariants(storage)


def test_an_approved_snapshot_without_a_valid_row_is_applied_and_a_restore_reverts_it(storage: LakeStorage,
                                                                                     spark: SparkSession) -> None:
    """Found by test_restore_model: such a snapshot, once approved, deletes every older key,
    but was recorded `rejected`, so a restore before it kept its deletes in the history
    (whose current rows then were not the table) and `--reapply` never published it again."""
    storage.put_bytes(FULL, "\n".join([HEADER, row(1, 1), row(2, 2), ""]).encode())
    apply_pending(storage, spark, "run-1", RULES)  # version 0
    storage.put_bytes(SNAPSHOT, f"{HEADER}\n,2024-01-31,Urban,CA,West,1,Retail,N,Y\n".encode())  # empty key only
    apply_pending(storage, spark, "run-2", RULES)
    approve_held(storage, None, "approve")
    apply_pending(storage, spark, "run-3", RULES)  # version 1: every key deleted as of the snapshot
    assert values(storage) == {} and statuses(storage)[SNAPSHOT] == APPLIED
    assert_history_invariants(storage)

    report = restore_insurance(storage, 0, "restore-1")
    assert report.reverted == [SNAPSHOT] and statuses(storage)[SNAPSHOT] == REVERTED
    assert values(storage) == {1: 1, 2: 2} and tombstones(storage) == {}
    assert_history_invariants(storage)  # the snapshot's deletes left the history with it
    apply_pending(storage, spark, "run-4", RULES, reapply=True)
    assert values(storage) == {} and statuses(storage)[SNAPSHOT] == APPLIED
    assert_history_invariants(storage)


def test_restoring_forward_brings_the_reinstated_runs_tombstones_back(storage: LakeStorage,
                                                                      spark: SparkSession) -> None:
    """Restored to the version after a delete, the delete's tombstone is back with its file:
    a late change older than the delete is superseded, as it was before the first restore."""
    storage.put_bytes(FULL, "\n".join([HEADER, row(1, 1), row(2, 2), ""]).encode())
    apply_pending(storage, spark, "run-1", RULES)  # version 0
    storage.put_bytes(C1, f"D,{row(2, 0)}\n".encode())
    apply_pending(storage, spark, "run-2", RULES)  # version 1
    restore_insurance(storage, 0, "restore-1")  # version 2: the delete is reverted
    assert tombstones(storage) == {} and values(storage) == {1: 1, 2: 2}
    report = restore_insurance(storage, 1, "restore-2")  # version 3: C1 is back
    assert report.reinstated == [C1] and values(storage) == {1: 1}
    assert tombstones(storage) == {2: C1}
    storage.put_bytes(C_OLD, f"U,{row(2, 20)}\n".encode())  # older than C1's delete
    apply_pending(storage, spark, "run-3", RULES)
    assert values(storage) == {1: 1}
    assert_history_invariants(storage)


def test_a_run_that_commits_nothing_after_a_restore_belongs_to_the_versions_after_it(storage: LakeStorage,
                                                                                   spark: SparkSession) -> None:
    """A file whose run commits nothing belongs to the version current when its run started;
    when that version is a restore's commit, later versions still contain the file (found by
    test_restore_model: restoring to a later version reverted it)."""
    storage.put_bytes(FULL, "\n".join([HEADER, row(1, 1), ""]).encode())
    apply_pending(storage, spark, "run-1", RULES)  # version 0
    storage.put_bytes(C1, f"I,{row(2, 2)}\n".encode())
    apply_pending(storage, spark, "run-2", RULES)  # version 1
    restore_insurance(storage, 0, "restore-1")  # version 2
    storage.put_bytes(C_OLD, b"")  # an empty file: its run commits nothing
    report = apply_pending(storage, spark, "run-3", RULES)
    assert report.commits == [] and statuses(storage)[C_OLD] == APPLIED
    storage.put_bytes(C_LATE, f"I,{row(5, 5)}\n".encode())
    apply_pending(storage, spark, "run-4", RULES)  # version 3
    storage.put_bytes("raw/cdcload/20240403-090000000.csv", f"I,{row(6, 6)}\n".encode())
    apply_pending(storage, spark, "run-5", RULES)  # version 4
    report = restore_insurance(storage, 3, "restore-2")
    assert report.reverted == ["raw/cdcload/20240403-090000000.csv"]
    assert statuses(storage)[C_OLD] == APPLIED and values(storage) == {1: 1, 5: 5}


def reapplied_superseded_then_restored(storage: LakeStorage, spark: SparkSession) -> None:
    """A full load FULL, then a newer one; a restore reverts both; `--reapply` applies both in
    one run, where the newer decides the table (FULL's rows superseded: applied, with no table
    version; its deletes and rows are in the history and the tombstones, as in runs of their
    own: 2, FULL's, is deleted by the newer); a restore to FULL's first application."""
    second = "raw/fullload/c.csv"
    storage.put_bytes(C1, f"I,{row(1, 1)}\n".encode())
    apply_pending(storage, spark, "run-1", RULES)  # version 0
    storage.put_bytes(FULL, f"{HEADER}\n{row(2, 2)}\n".encode())  # as of its arrival: 1 deleted
    apply_pending(storage, spark, "run-2", RULES)  # version 1
    storage.put_bytes(second, f"{HEADER}\n{row(3, 3)}\n".encode())  # after it: 2 deleted
    apply_pending(storage, spark, "run-3", RULES)  # version 2
    restore_insurance(storage, 0, "restore-1")  # version 3: both reverted
    apply_pending(storage, spark, "run-4", RULES, reapply=True)  # version 4: the newer decides, FULL superseded
    assert values(storage) == {3: 3} and tombstones(storage) == {1: second, 2: second}
    assert statuses(storage)[FULL] == APPLIED
    restore_insurance(storage, 1, "restore-2")  # version 5: FULL's first application
    assert values(storage) == {2: 2}


def test_tombstones_follow_the_runs_not_a_superseded_reapplication(storage: LakeStorage,
                                                                   spark: SparkSession) -> None:
    """FULL's reapplication committed nothing of its own: its run (on version 3, not in
    version 1's lineage) is not a run of version 1, so the tombstones are those run-2 left."""
    reapplied_superseded_then_restored(storage, spark)
    assert tombstones(storage) == {1: FULL}


def test_a_restore_to_a_full_loads_first_application_after_it_was_reapplied_superseded(
        storage: LakeStorage, spark: SparkSession) -> None:
    """Found by test_restore_model: the restore kept FULL applied but took only the newer
    snapshot's history rows out, so key 1 was current in the history and 2 (FULL's row, in
    the table) was not. The history goes back to what FULL's first run wrote."""
    reapplied_superseded_then_restored(storage, spark)
    assert_history_invariants(storage)
    assert [(k, current, row and row["insured_value"]) for k, _, _, current, row in history_versions(storage)] == [
        (1, False, 1), (1, False, None), (2, True, 2)]
