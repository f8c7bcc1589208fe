"""Property test: restores, reapplies and killed runs of `tpcds.web_sales` agree with the model.

The steps of test_sequence_model (day objects put, sensor loads, backfills, corrections
named with a DMS time or without one) are interleaved with:

- `restore S` (the restore job's Iceberg path, lake_assets/jobs/restore.py: pyiceberg makes
  snapshot S current, the ledger reverts the objects S does not contain): the model goes
  back to its rows and tombstones as of S; objects applied since are `reverted`, reverted
  ones S contains `applied` again; sequences already recorded stay recorded;
- a backfill leaves a reverted day out (as the web_sales asset does);
- `lake run --reapply`: the days pending or reverted, then the corrections pending or
  reverted (the web_sales asset, then web_sales_corrections), each object with the sequence
  it was recorded with;
- a killed run: a load, backfill or corrections run in a child process that SIGKILLs itself
  at a seam (helpers/killed_run.py: after the tombstones, before the table's MERGE; or at
  the ledger write, after the commit); the next run of the same work, in process, must
  converge to the model of one run.

Checked after every step: the table's keys and quantities (DuckDB reading the catalog), and
each object's latest ledger entry: its status and applied/superseded counts.
"""

import copy
import datetime as dt
import uuid
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lake_assets.core.formats import iceberg
from lake_assets.core.formats.delta import open_table as open_delta, to_arrow
from lake_assets.core.ledger import APPLIED, HELD, REVERTED, Ledger
from lake_assets.core.tables import TPCDS_TOMBSTONES, table
from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.storage import LakeStorage
from lake_assets.jobs.restore import _rollback_iceberg
from lake_assets.tpcds.corrections import apply_corrections
from lake_assets.tpcds.load import load_fact_days, pending_fact_days
from lake_assets.tpcds.pending import reverted_days
from lake_assets.tpcds.schema import RAW, TOMBSTONES, sk_date
from lake_assets_tests.conftest import make_storage
from lake_assets_tests.helpers.iceberg import drop_namespace_tables
from lake_assets_tests.helpers.killed_run import KILLED, killed
from lake_assets_tests.helpers.tpcds import fact_key
from lake_assets_tests.helpers.tpcds_model import key_of
from lake_assets_tests.tpcds.test_load import fact_rows
from lake_assets_tests.tpcds.test_sequence_model import (
    CORRECTION, DAY_PUT, DAYS, MARKER, QUANTITY, SETTINGS, WEB_SALES, Lake, line,
)

SEAMS = ("tombstones", "ledger")
Object = tuple[str, str]  # (object key, content)


class Ledgered(Lake):
    """The model's side with the ledger's statuses: each object's (key, content) status, and
    the content each key's latest ledger entry is about."""

    def __init__(self) -> None:
        super().__init__()
        self.status: dict[Object, str] = {}
        self.latest: dict[str, str] = {}  # object key -> the content of its latest entry

    def loaded(self, objects: list[Object]) -> None:
        for key, content in objects:
            self.status[(key, content)] = APPLIED
            self.latest[key] = content

    def held_back(self, objects: list[Object]) -> None:
        for key, content in objects:
            self.status[(key, content)] = HELD
            self.latest[key] = content

    def restored(self, then: "Ledgered") -> "Ledgered":
        """Back to `then`'s rows and tombstones; statuses follow what `then` had applied."""
        back = copy.deepcopy(self)
        back.model = copy.deepcopy(then.model)
        applied_then = {o for o, status in then.status.items() if status == APPLIED}
        for obj, status in self.status.items():
            if status == APPLIED and obj not in applied_then or status == REVERTED and obj in applied_then:
                back.status[obj] = REVERTED if status == APPLIED else APPLIED
                back.latest[obj[0]] = obj[1]
        return back

    def reverted(self, obj: Object) -> bool:
        return self.status.get(obj) == REVERTED


STEPS = st.lists(st.one_of(DAY_PUT, CORRECTION, st.just(("load",)), st.just(("backfill",)),
                           st.tuples(st.just("restore"), st.integers(0, 99)), st.just(("reapply",))),
                 min_size=2, max_size=5)


@st.composite
def scenarios(draw) -> list[tuple]:
    """A day put and loaded, a correction (something to restore to), then random steps and
    a last reapply. One run that has work to do (the first load, or a correction) is killed
    at a seam (the step's last element)."""
    steps = [draw(DAY_PUT), ("load",), draw(CORRECTION), *draw(STEPS), ("reapply",)]
    victim = draw(st.sampled_from([i for i, s in enumerate(steps) if s[0] == "cdc" or i == 1]))
    return [(*s, draw(st.sampled_from(SEAMS)) if i == victim else None) for i, s in enumerate(steps)]


@settings(SETTINGS, max_examples=3)
@given(steps=scenarios())
def test_restores_reapplies_and_killed_runs_match_the_model(storage: LakeStorage, spark: SparkSession,
                                                            steps) -> None:
    bucket = make_storage(storage.endpoint_url, Path(storage.home), f"n-{uuid.uuid4().hex[:12]}")
    catalog: LakeCatalog = bucket.catalog()
    drop_namespace_tables(catalog, "tpcds")
    try:
        run_steps(bucket, spark, catalog, steps)
    finally:
        bucket.delete_prefix("")
        bucket.get_client().delete_bucket(Bucket=bucket.bucket)


def current_snapshot(storage: LakeStorage) -> int | None:
    handle = iceberg.open_table(storage, table(WEB_SALES))
    return None if handle is None else iceberg.current_snapshot_id(handle)


def run(storage: LakeStorage, spark: SparkSession, work: str, arguments: list[str], seam: str | None,
        run_id: str) -> None:
    """Run `work` (killed_run's names), killed at `seam` first if one is given; if the kill
    happened, the same work again (the rerun), in process."""
    if seam is not None:
        code = killed(storage, work, seam, *arguments)
        event(f"{work} at {seam}: {'killed' if code == KILLED else 'not reached'}")
        if code != KILLED:
            return
    if work == "corrections":
        apply_corrections(storage, spark, run_id, reapply="reapply" in arguments)
    else:
        load_fact_days(storage, spark, [None if a == "null" else dt.date.fromisoformat(a) for a in arguments],
                       run_id)


def run_steps(bucket: LakeStorage, spark: SparkSession, catalog: LakeCatalog, steps: list[tuple]) -> None:
    lake = Ledgered()
    at_snapshot: dict[int, Ledgered] = {}  # the model as of each snapshot a run or restore left current
    raw: dict[str, tuple[str, list[list[str]], int]] = {}  # day object key -> (content, rows, day)
    corrections: dict[str, tuple[str, list[list[str]], str | None, list[bool]]] = {}  # key -> its content
    for number, (*step, seam) in enumerate(steps):
        if step[0] == "day":
            _, day, picks = step
            rows = [line(key, day, quantity) for key, quantity in dict(picks).items()]
            for fields in rows:
                fields[MARKER] = str(number)  # every put of rows is new content (an empty one is not)
            content = "".join("|".join(r) + "\n" for r in rows)
            bucket.put_bytes(fact_key(sk_date(day)), content.encode())
            raw[fact_key(sk_date(day))] = (content, rows, day)
            continue
        if step[0] == "restore":
            now = current_snapshot(bucket)
            targets = sorted(s for s in at_snapshot if s != now)
            if not targets:
                continue
            target = targets[step[1] % len(targets)]
            metadata = _rollback_iceberg(bucket, table(WEB_SALES), target, f"restore-{number}")
            event(f"restore reverting {len(metadata['reverted_files'].value)}, "
                  f"reinstating {len(metadata['reinstated_files'].value)}")
            lake = lake.restored(at_snapshot[target])
        elif step[0] == "cdc":
            _, named, lines = step
            key = f"{RAW.corrections}{named if named != 'fix' else f'fix-{number}'}.dat"
            rows, deletes, text = [], [], []
            for op, k, day, quantity in lines:
                fields = line(k, day, quantity)
                rows.append(fields)
                deletes.append(op == "D")
                text.append(op + "|" + "|".join(fields))
            content = "\n".join(text) + "\n"
            bucket.put_bytes(key, content.encode())
            corrections[key] = (content, rows, None if named == "fix" else named, deletes)
            run(bucket, spark, "corrections", [], seam, f"run-{number}")
            load_corrections(lake, [key], corrections)
        elif step[0] == "reapply":
            ledger = Ledger(bucket)
            days = pending_fact_days(bucket, ledger, reapply=True)
            run(bucket, spark, "days", [d.isoformat() if d else "null" for d in days], seam, f"run-{number}")
            load_days(lake, [fact_key(d) for d in days], raw)
            again = [k for k, (content, *_) in corrections.items() if lake.reverted((k, content))]
            run(bucket, spark, "corrections", ["reapply"], seam, f"run-{number}-corrections")
            load_corrections(lake, again, corrections)
        else:
            ledger = Ledger(bucket)
            days = (pending_fact_days(bucket, ledger) if step[0] == "load" else
                    [sk_date(d) for d in DAYS if sk_date(d) not in reverted_days(bucket, ledger)])
            run(bucket, spark, "days", [d.isoformat() if d else "null" for d in days], seam, f"run-{number}")
            load_days(lake, [fact_key(d) for d in days], raw)
        snapshot = current_snapshot(bucket)
        if snapshot is not None:
            at_snapshot[snapshot] = copy.deepcopy(lake)
        check(bucket, catalog, lake, step)


def load_days(lake: Ledgered, keys: list[str], raw: dict[str, tuple[str, list[list[str]], int]]) -> None:
    chosen = sorted((raw[key][2], key) for key in keys if key in raw)
    held = lake.load([(key, raw[key][0], raw[key][1], None, day, [False] * len(raw[key][1])) for day, key in chosen])
    lake.loaded([(key, raw[key][0]) for _, key in chosen if key not in held])
    lake.held_back([(key, raw[key][0]) for _, key in chosen if key in held])


def load_corrections(lake: Ledgered, keys: list[str], corrections: dict) -> None:
    """One corrections run of `keys` (the model's `load` takes them in one run)."""
    if not keys:
        return
    lake.load([(key, corrections[key][0], corrections[key][1], corrections[key][2], None, corrections[key][3])
               for key in keys])
    lake.loaded([(key, corrections[key][0]) for key in keys])


def check(bucket: LakeStorage, catalog: LakeCatalog, lake: Ledgered, step: list) -> None:
    found = fact_rows(catalog)
    table_rows = {key_of(["" if v is None else str(v) for v in r]): str(r[QUANTITY]) for r in found}
    assert len(table_rows) == len(found), ("a key twice", step)
    assert table_rows == {k: f[QUANTITY] for k, (f, _) in lake.model.rows.items()}, step
    latest = {e["source_file"]: e for e in Ledger(bucket).entries(WEB_SALES).to_pylist()}
    assert {k: (e["rows_applied"], e["rows_superseded"]) for k, e in latest.items()} == lake.counts, step
    assert {k: e["status"] for k, e in latest.items()} == \
        {k: lake.status[(k, content)] for k, content in lake.latest.items()}, step


def test_a_restore_takes_the_reverted_deletes_tombstones_out(storage: LakeStorage, spark: SparkSession,
                                                             catalog: LakeCatalog) -> None:
    """A day loads key K; a correction of 2024-01-02 deletes it; restoring the snapshot before
    the correction brings K back. A correction of 2024-01-01 (older than the reverted delete,
    newer than the day) must then update K: the reverted delete is not in the table's history.
    (Found by writing this file's model: the Iceberg restore left the delete's tombstone.)"""
    key, day = (1, 1), DAYS[0]
    storage.put_bytes(fact_key(sk_date(day)), ("|".join(line(key, day, 5)) + "\n").encode())
    load_fact_days(storage, spark, [sk_date(day)], "run-1")
    loaded = current_snapshot(storage)
    storage.put_bytes(f"{RAW.corrections}20240102-000000000.dat", ("D|" + "|".join(line(key, day, 5)) + "\n").encode())
    apply_corrections(storage, spark, "run-2")
    assert fact_rows(catalog) == []
    _rollback_iceberg(storage, table(WEB_SALES), loaded, "restore-1")
    assert [r[QUANTITY] for r in fact_rows(catalog)] == [5]
    storage.put_bytes(f"{RAW.corrections}20240101-000000000.dat", ("U|" + "|".join(line(key, day, 7)) + "\n").encode())
    apply_corrections(storage, spark, "run-3")
    assert [r[QUANTITY] for r in fact_rows(catalog)] == [7]


def test_restoring_forward_brings_the_reinstated_deletes_tombstones_back(storage: LakeStorage, spark: SparkSession,
                                                                         catalog: LakeCatalog) -> None:
    """As above, then restored forward to the correction's snapshot: K is deleted again and
    the correction is applied again, and so is its tombstone: a correction of 2024-01-01
    (older than the delete) is superseded, as it was before the first restore."""
    key, day = (1, 1), DAYS[0]
    storage.put_bytes(fact_key(sk_date(day)), ("|".join(line(key, day, 5)) + "\n").encode())
    load_fact_days(storage, spark, [sk_date(day)], "run-1")
    loaded = current_snapshot(storage)
    delete = f"{RAW.corrections}20240102-000000000.dat"
    storage.put_bytes(delete, ("D|" + "|".join(line(key, day, 5)) + "\n").encode())
    apply_corrections(storage, spark, "run-2")
    deleted = current_snapshot(storage)
    assert loaded is not None and deleted is not None
    _rollback_iceberg(storage, table(WEB_SALES), loaded, "restore-1")
    assert [r[QUANTITY] for r in fact_rows(catalog)] == [5]
    metadata = _rollback_iceberg(storage, table(WEB_SALES), deleted, "restore-2")
    assert metadata["reinstated_files"].value == [delete] and fact_rows(catalog) == []
    late = f"{RAW.corrections}20240101-000000000.dat"
    storage.put_bytes(late, ("U|" + "|".join(line(key, day, 7)) + "\n").encode())
    apply_corrections(storage, spark, "run-3")
    assert fact_rows(catalog) == []
    latest = Ledger(storage).latest(WEB_SALES)
    assert [(e["status"], e["rows_applied"], e["rows_superseded"]) for (k, _), e in latest.items() if k == late] == \
        [(APPLIED, 0, 1)]


def test_deletes_an_earlier_release_tombstoned_in_tpcds_tombstones_still_refuse_older_changes(
        storage: LakeStorage, spark: SparkSession, catalog: LakeCatalog) -> None:
    """A delete goes to `web_sales_tombstones`, with its object and line. Earlier releases kept
    web_sales' tombstones in `tpcds_tombstones`, each naming its Iceberg table: such a delete
    still refuses an older change of its key, one of another table does not, and a restore to
    before the delete takes it back."""
    (key, other, gone), day = [(1, 1), (2, 2), (3, 3)], DAYS[0]
    storage.put_bytes(fact_key(sk_date(day)), ("|".join(line(key, day, 5)) + "\n").encode())
    load_fact_days(storage, spark, [sk_date(day)], "run-1")
    loaded = current_snapshot(storage)
    delete = f"{RAW.corrections}20240102-000000000.dat"
    storage.put_bytes(delete, ("U|" + "|".join(line(other, day, 1)) + "\nD|" + "|".join(line(key, day, 5)) + "\n")
                      .encode())
    apply_corrections(storage, spark, "run-2")
    tombstones = DeltaTable(TOMBSTONES.uri(storage), storage_options=storage.delta_storage_options())
    assert [(r["ws_item_sk"], r["source_file"], r["source_line"]) for r in tombstones.to_pyarrow_table().to_pylist()] \
        == [(key[0], delete, 2)]
    assert open_delta(storage, TPCDS_TOMBSTONES) is None

    # as an earlier release left it: the delete in tpcds_tombstones, with this table's uuid; and
    # a delete of a third key, kept for a table dropped since
    earlier = tombstones.to_pyarrow_table().drop_columns(["source_line"]).to_pylist()
    this_table = str(iceberg.open_table(storage, table(WEB_SALES)).metadata.table_uuid)
    dropped = {**earlier[0], "ws_item_sk": gone[0], "ws_order_number": gone[1], "table_uuid": str(uuid.uuid4())}
    write_deltalake(TPCDS_TOMBSTONES.uri(storage), pa.Table.from_pylist([{**earlier[0], "table_uuid": this_table},
                                                                         dropped]),
                    storage_options=storage.delta_storage_options())
    storage.delete_prefix(f"{TOMBSTONES.prefix}/")
    late = f"{RAW.corrections}20240101-000000000.dat"
    storage.put_bytes(late, ("U|" + "|".join(line(key, day, 7)) + "\nU|" + "|".join(line(gone, day, 9)) + "\n")
                      .encode())
    apply_corrections(storage, spark, "run-3")
    assert sorted((key_of(r), r[QUANTITY]) for r in fact_rows(catalog)) == [(other, 1), (gone, 9)]
    assert [(e["rows_applied"], e["rows_superseded"]) for (k, _), e in Ledger(storage).latest(WEB_SALES).items()
            if k == late] == [(1, 1)]

    _rollback_iceberg(storage, table(WEB_SALES), loaded, "restore-1")  # before the delete: its tombstone goes
    assert [len(to_arrow(t)) if t is not None else 0 for t in (open_delta(storage, TPCDS_TOMBSTONES),
                                                               open_delta(storage, TOMBSTONES))] == [0, 0]
    again = f"{RAW.corrections}20240101-000000001.dat"
    storage.put_bytes(again, ("U|" + "|".join(line(key, day, 8)) + "\n").encode())
    apply_corrections(storage, spark, "run-4")
    assert sorted((key_of(r), r[QUANTITY]) for r in fact_rows(catalog)) == [(key, 8)]
