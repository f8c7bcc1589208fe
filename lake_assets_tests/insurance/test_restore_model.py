"""Property test: restores, reapplies and killed runs of `insurance` agree with the model.

The deliveries of test_cdc_model (shuffled, late and re-delivered CDC files, snapshots as of
their arrival, some re-delivered) are interleaved with:

- `restore V` (the restore job's work: insurance/restore.py, then the feed's catch-up): the
  model goes back to its state when the table was at version V (table, tombstones, floor,
  history); the deliveries applied since are `reverted` with their counts, those a restore
  reverted earlier that V contains are `applied` again (Model.restored);
- `lake run --reapply`: the reverted deliveries still in the raw zone are applied again
  with the delivery number and stamp they had, in one run with whatever else is pending;
- a killed run: the run (plain or reapply) in a child process that SIGKILLs itself at a seam
  (helpers/killed_run.py: just after the table commit, before tombstones, history and
  ledger; or at the ledger write, after them); the table must then be at a committed
  version (the one before, or the run's own), and the next run, in process, must converge
  to the model of that run (it finishes the killed run from its stage: core/apply/stage.py). The
  deterministic test below also compares such a lake with a twin where nothing was killed.

After every step the table, `_sequence`s, every delivery's latest ledger entry (status and
counts), the quarantine, the feed replayed from version 0 at every version and the SCD2
history are compared with the model (test_cdc_model.assert_lake_matches).
"""

import uuid
from pathlib import Path

import hypothesis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lake_assets.core.formats.delta import current_version, open_table, to_arrow
from lake_assets.core.ledger import Ledger
from lake_assets_tests.helpers.insurance_tables import INSURANCE, INSURANCE_TOMBSTONES
from lake_assets.core import change_feed
from lake_assets.core.apply import feed
from lake_assets_tests.helpers.insurance_tables import INSURANCE_CHANGES
from lake_assets_tests.helpers.insurance_tables import DATA_COLUMN_NAMES
from lake_assets_tests.helpers.insurance import apply_pending, approve_held, restore_insurance
from lake_assets_tests.helpers.insurance import STAGING
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.conftest import make_storage
from lake_assets_tests.helpers.changes import assert_history_invariants, history_versions
from lake_assets_tests.helpers.killed_run import KILLED, killed
from lake_assets_tests.insurance.test_cdc_model import (
    FILE, FULL, FULL2, NEWLINES, SETTINGS, Delivery, Line, Model, _cdc, _delete, _upsert, assert_lake_matches,
    bad_rows, cdc_name, drop_bucket, full_load_line, render,
)

#: Where the property test kills runs: just after the table commit, and at the ledger write.
SEAMS = ("table-commit", "ledger")


@st.composite
def scenarios(draw) -> list[tuple]:
    """Steps: ("run", deliveries, reapply, seam or None), ("restore", pick): pick chooses
    among the versions the model knows (not the current one). Two runs, then restores,
    late runs and reapplies in a random order, a last reapply; one run is killed."""
    names = [cdc_name(i) for i in range(4)]

    def run(reapply: bool) -> tuple:
        deliveries = []
        if not reapply:
            for name, time in draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True)):
                lines, newline = draw(FILE)
                deliveries.append(Delivery(name, lines, newline, time))
            for name in draw(st.lists(st.sampled_from([FULL, FULL2]), max_size=1)):
                lines, newline = draw(st.tuples(st.lists(full_load_line(), min_size=1, max_size=4), NEWLINES))
                deliveries.append(Delivery(name, lines, newline, None))
        return ("run", deliveries, reapply, None)

    middle = draw(st.permutations(["restore", "restore", "run", "reapply"]))
    steps = [run(False), run(False)]
    for kind in middle:
        steps.append(("restore", draw(st.integers(0, 99))) if kind == "restore" else run(kind == "reapply"))
    steps.append(run(True))
    runs = [i for i, step in enumerate(steps) if step[0] == "run"]
    victim = draw(st.sampled_from(runs))
    steps[victim] = (*steps[victim][:3], draw(st.sampled_from(SEAMS)))
    return steps


@settings(SETTINGS, max_examples=4)
@given(steps=scenarios())
def test_restores_reapplies_and_killed_runs_match_the_model(storage: LakeStorage, spark: SparkSession,
                                                            steps) -> None:
    bucket = make_storage(storage.endpoint_url, Path(storage.home), f"r-{uuid.uuid4().hex[:12]}")
    try:
        run_steps(bucket, spark, steps)
    finally:
        drop_bucket(bucket)


def event(value: str) -> None:
    """Count `value` in Hypothesis's statistics (run_steps also runs outside a property test)."""
    if hypothesis.currently_in_test_context():
        hypothesis.event(value)


def table_rows(storage: LakeStorage) -> dict[int, dict]:
    delta = open_table(storage, INSURANCE)
    rows = to_arrow(delta).select(DATA_COLUMN_NAMES).to_pylist() if delta else []
    return {r["policy_id"]: r for r in rows}


def run_steps(storage: LakeStorage, spark: SparkSession, steps: list[tuple]) -> None:
    model = Model()
    at_version: dict[int, Model] = {}  # the model as of each table version a run or restore left
    deliveries: dict[tuple[str, str], int] = {}  # (name, ETag) -> its delivery number
    contents: dict[str, set[bytes]] = {}  # every body put under each name
    for number, step in enumerate(steps):
        if step[0] == "restore":
            current = current_version(storage, INSURANCE)
            targets = sorted(v for v in at_version if v != current)
            if not targets:
                continue
            target = targets[step[1] % len(targets)]
            report = restore_insurance(storage, target, f"restore-{number}")
            event(f"restore reverting {len(report.reverted)}, reinstating {len(report.reinstated)}")
            feed.catch_up(spark, storage, INSURANCE, INSURANCE_CHANGES, ["policy_id"])  # as the restore job does
            model = model.restored(at_version[target])
            at_version[report.version_after] = copy_of(model)
        else:
            _, run, reapply, seam = step
            put = []
            for item in run:
                body = render(item.lines, item.newline, header=item.time is None)
                if body in contents.setdefault(item.name, set()):
                    continue  # bytes put before are that delivery (same ETag): new to nobody
                contents[item.name].add(body)
                etag = storage.put_bytes(item.name, body)
                deliveries[(item.name, etag)] = 1 + sum(name == item.name for name, _ in deliveries)
                put.append(item)
            if seam is not None:
                before = current_version(storage, INSURANCE)
                committed = {v: table_rows_at(storage, v) for v in ([before] if before is not None else [])}
                code = killed(storage, "insurance", seam, *(["reapply"] if reapply else []))
                event(f"run at {seam}: {'killed' if code == KILLED else 'not reached'}")
                if code == KILLED:
                    after = current_version(storage, INSURANCE)
                    # a committed version: the one before, or (killed after its commit) the run's own, once
                    assert after == before or after == (before if before is not None else -1) + 1, (before, after)
                    if after == before and before is not None:
                        assert table_rows(storage) == committed[before]
            apply_pending(storage, spark, f"run-{number}", reapply=reapply)
            model.run(put, reapply=reapply)
            remember(storage, model, at_version)  # a run that commits nothing: its files are the version's
            if model.held:  # approve at once: a held snapshot is test_cdc_model's subject
                approve_held(storage, None, f"approve-{number}")
                apply_pending(storage, spark, f"run-{number}-approved")
                model.run([], approve=True)
                remember(storage, model, at_version)
        assert_lake_matches(storage, model, deliveries)


def table_rows_at(storage: LakeStorage, version: int) -> dict[int, dict]:
    rows = to_arrow(open_table(storage, INSURANCE, version=version)).select(DATA_COLUMN_NAMES).to_pylist()
    return {r["policy_id"]: r for r in rows}


def remember(storage: LakeStorage, model: Model, at_version: dict[int, Model]) -> None:
    """The model as of the table's current version (a run that commits nothing adds its
    files to the version current when it started, as the restore's rule says)."""
    version = current_version(storage, INSURANCE)
    if version is not None:
        at_version[version] = copy_of(model)


def copy_of(model: Model) -> Model:
    return model.restored(model)  # a deep copy (restoring to itself changes no status)


def lake_state(storage: LakeStorage) -> dict:
    """What a finished run leaves, without the times and run ids that differ between two lakes:
    the table, its version, the history, the tombstones, the feed and the ledger."""
    tombstones = open_table(storage, INSURANCE_TOMBSTONES)
    return {
        "table": table_rows(storage), "version": current_version(storage, INSURANCE),
        "history": history_versions(storage),
        "tombstones": sorted((t["policy_id"], t["_sequence"], t["source_file"]) for t in to_arrow(tombstones).to_pylist())
        if tombstones else [],
        "feed": [(r["policy_id"], r["_change_type"], r["_commit_version"], r["_sequence"])
                 for r in change_feed.read(storage, INSURANCE, INSURANCE_CHANGES, "policy_id", 0).to_pylist()],
        "ledger": [(e["source_file"], e["status"], e["rows_applied"], e["rows_superseded"], e["table_version"],
                    e["source_sequence"]) for e in Ledger(storage).entries("insurance").to_pylist()],
    }


@pytest.mark.parametrize("seams", [("table-commit",), ("ledger",), ("table-commit", "ledger")])
def test_a_killed_run_is_finished_as_an_unkilled_run_would_have_been(storage: LakeStorage, spark: SparkSession,
                                                                    seams: tuple[str, ...]) -> None:
    """A run publishing a snapshot that drops key 2 and a CDC file deleting key 3 is killed by
    a real SIGKILL just after its table commit (before tombstones, history and ledger) or at
    its ledger write; with two seams, the run that finishes it is killed at its ledger write
    too. The next run must leave the table, history, tombstones, feed and ledger exactly as
    in a twin lake where nothing was killed (found by this file's model test: the rerun saw
    2 gone from the table and deleted nothing, so the history kept 2 current)."""
    twin = make_storage(storage.endpoint_url, Path(storage.home), f"t-{uuid.uuid4().hex[:12]}")
    header = ",".join(DATA_COLUMN_NAMES)
    row = "{},2024-01-31,Urban,CA,West,{},Retail,N,Y"
    try:
        for lake in (twin, storage):
            lake.put_bytes(FULL, f"{header}\n{row.format(1, 1)}\n{row.format(2, 2)}\n{row.format(3, 3)}\n".encode())
            apply_pending(lake, spark, "run-1")
            lake.put_bytes(cdc_name(0)[0], f"D,{row.format(3, 0)}\nU,{row.format(1, 5)}\n".encode())
            lake.put_bytes(FULL2, f"{header}\n{row.format(1, 10)}\n{row.format(3, 30)}\n".encode())  # 2 deleted
        apply_pending(twin, spark, "run-2")
        committed = current_version(storage, INSURANCE)
        for seam in seams:
            assert killed(storage, "insurance", seam) == KILLED
            assert current_version(storage, INSURANCE) == committed + 1  # committed once, never again
        assert table_rows(storage).keys() == {1}  # 3 deleted by the CDC file (newer than the snapshot)
        apply_pending(storage, spark, "run-2")
        assert lake_state(storage) == lake_state(twin)
        assert_history_invariants(storage)
        assert not storage.list_objects(STAGING)
    finally:
        drop_bucket(twin)


def test_a_restore_after_finishing_a_killed_run_keeps_an_approved_snapshot_it_contains(
        storage: LakeStorage, spark: SparkSession) -> None:
    """Found by the property test (seeds 8 and 10), shrunk: a CDC file of deletes only, its
    run killed just after its table commit and finished by the next run; a late CDC file and
    a full load whose only row is bad (held, approved, published); restores and reapplies.
    After the last reapply the ledger had the full load `applied` where the model had it
    `reverted`: its first application committed version 2, its reapplication (on the restore
    to version 0) committed nothing, and the restore to version 1 judged that reapplication
    by the start of the first run (before version 2: version 1), so it kept it."""
    bad = bad_rows(5, "")[0]
    full = Delivery(FULL, [Line(bad[1], "bad", reason=bad[0].value)], "\n", None)
    steps = [
        ("run", [_cdc(1, _delete(4), _delete(1))], False, "table-commit"),
        ("run", [_cdc(0, _upsert(1, 1), _upsert(2, 2), _upsert(4, 4)), full], False, None),
        ("restore", 42),
        ("run", [_cdc(0)], False, None),  # 20240101 re-delivered empty
        ("run", [], True, None),
        ("restore", 25),
        ("run", [], True, None),
    ]
    run_steps(storage, spark, steps)
