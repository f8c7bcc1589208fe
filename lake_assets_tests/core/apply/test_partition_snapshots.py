"""Partition snapshots (`partition:` on a snapshot source): each object replaces one partition.

On the real embedded S3 and Sail. The examples spell out the expected table, ledger, feed and
history; the property test runs random CDC files and partition snapshots, in random runs, against
a small pure-Python model of the rules core/apply/partitions.py documents. delta-rs reads the table.
"""

import datetime as dt
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lake_assets.core.apply.run import apply_pending
from lake_assets.core.declaration import DeclarationError, TableDeclaration
from lake_assets.core.formats import iceberg
from lake_assets.core.formats.delta import open_table
from lake_assets.core.ledger import Ledger
from lake_assets.core.registry import parse, read_file
from lake_assets.core.tables import table_set
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.killed_run import KILLED, killed

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _declared(name: str, partition_type: str = "DATE", guard: str = "", table_format: str = "delta",
              partition_by: str = "day") -> TableDeclaration:
    """`day` is the partition of the snapshot source's objects; the table is partitioned by it, by a
    transform of it (`truncate(2, day)`, on Iceberg: the star's way), or not ("")."""
    return parse(_declaration(name, partition_type, guard, table_format, partition_by), "test")


def _declaration(name: str, partition_type: str, guard: str, table_format: str, partition_by: str) -> str:
    """The text of `_declared`'s declaration (a killed run's child process reads it from a file)."""
    return f"""
name: {name}
group: sales
format: {table_format}
keys: [id]
partition_by: [{f'"{partition_by}"' if partition_by else ''}]
columns:
  - {{name: id, type: BIGINT, nullable: false}}
  - {{name: day, type: {partition_type}}}
  - {{name: amount, type: BIGINT}}
sources:
  - {{prefix: raw/{name}/days/, kind: snapshot, partition: day}}
  - {{prefix: raw/{name}/cdc/, kind: cdc}}
{guard}"""


def _rows(storage: LakeStorage, uri: str) -> list[dict]:
    return DeltaTable(uri, storage_options=storage.delta_storage_options()).to_pyarrow_table().to_pylist()


def _table(storage: LakeStorage, declaration: TableDeclaration) -> dict[int, tuple]:
    return {r["id"]: (r["day"], r["amount"]) for r in _rows(storage, table_set(declaration).table.uri(storage))}


def test_a_day_outside_the_daily_partitions_is_refused_until_they_hold_it(storage: LakeStorage,
                                                                         spark: SparkSession) -> None:
    """With daily partitions, an object of a day they do not hold is refused whole by its place
    (`wrong_partition`: the UI could show no partition of it) and blocks no other; once the
    declaration's partitions hold its day, the next run applies it."""
    name = f"sales_{uuid.uuid4().hex[:6]}"
    plain = _declared(name).model_dump()
    april = TableDeclaration.model_validate({**plain, "daily_partitions": {"start": "2024-04-01", "end": "2024-04-30"}})
    days = april.sources[0].prefix
    storage.put_bytes(f"{days}day=2024-04-01/20240401-120000000.csv", b"1,2024-04-01,10\n")
    storage.put_bytes(f"{days}day=2024-05-01/20240501-120000000.csv", b"2,2024-05-01,20\n")
    report = apply_pending(april, storage, spark, "run-1")
    by_key = {f.source_file.removeprefix(days): f for f in report.files}
    assert by_key["day=2024-04-01/20240401-120000000.csv"].status == "applied"
    refused = by_key["day=2024-05-01/20240501-120000000.csv"]
    assert refused.status == "rejected" and refused.detail.startswith(
        "wrong_partition: day=2024-05-01 (2024-05-01) is outside the table's daily partitions (2024-04-01..2024-04-30)")
    assert _table(storage, april) == {1: (dt.date(2024, 4, 1), 10)}
    assert apply_pending(april, storage, spark, "run-2").files == []  # refused: not pending again as it is

    may = TableDeclaration.model_validate({**plain, "daily_partitions": {"start": "2024-04-01", "end": "2024-05-31"}})
    (entry,) = apply_pending(may, storage, spark, "run-3").files
    assert (entry.source_file, entry.status, entry.rows_applied) == (refused.source_file, "applied", 1)
    assert _table(storage, may) == {1: (dt.date(2024, 4, 1), 10), 2: (dt.date(2024, 5, 1), 20)}


def test_an_object_replaces_its_partition_and_no_other(storage: LakeStorage, spark: SparkSession) -> None:
    name = f"sales_{uuid.uuid4().hex[:6]}"
    table = _declared(name, guard="guard: {hold_rejected: false}")
    days, cdc = (s.prefix for s in table.sources)
    first, second = dt.date(2024, 4, 1), dt.date(2024, 4, 2)
    storage.put_bytes(f"{days}day=2024-04-01/20240401-120000000.csv", b"1,2024-04-01,10\n2,2024-04-01,20\n"
                                                                      b"3,2024-04-01,30\n")
    storage.put_bytes(f"{days}day=2024-04-02/20240402-120000000.csv", b"4,2024-04-02,40\n5,2024-04-02,50\n")
    report = apply_pending(table, storage, spark, "run-1")
    assert [f.status for f in report.files] == ["applied", "applied"]
    assert _table(storage, table) == {1: (first, 10), 2: (first, 20), 3: (first, 30), 4: (second, 40),
                                      5: (second, 50)}

    # the first day again, later: key 2 is gone, key 1 changed, a row of the second day is not this object's
    storage.put_bytes(f"{days}day=2024-04-01/20240403-120000000.csv", b"1,2024-04-01,11\n3,2024-04-01,30\n"
                                                                      b"6,2024-04-02,60\n")
    storage.put_bytes(f"{days}loose.csv", b"7,2024-04-01,70\n")  # in no partition's folder
    storage.put_bytes(f"{days}day=April/20240403-120000000.csv", b"8,2024-04-01,80\n")  # no DATE in its folder
    report = apply_pending(table, storage, spark, "run-2")
    by_key = {f.source_file.removeprefix(days): f for f in report.files}
    reload = by_key["day=2024-04-01/20240403-120000000.csv"]
    assert (reload.status, reload.rows_in_file, reload.rows_applied, reload.rows_quarantined) == ("applied", 3, 2, 1)
    for refused in ("loose.csv", "day=April/20240403-120000000.csv"):
        assert by_key[refused].status == "rejected" and by_key[refused].detail.startswith("wrong_partition: ")
    assert "not in a day=<value> folder" in by_key["loose.csv"].detail
    assert _table(storage, table) == {1: (first, 11), 3: (first, 30), 4: (second, 40), 5: (second, 50)}
    assert report.commits[-1].operation == "partition load"
    assert (report.total("inserted"), report.total("updated"), report.total("deleted")) == (0, 2, 1)

    quarantine = _rows(storage, table_set(table).quarantine.uri(storage))
    misplaced = [r for r in quarantine if r["reason"] == "wrong_partition" and r["raw_text"] == "6,2024-04-02,60"]
    assert len(misplaced) == 1 and "day=2024-04-01" in misplaced[0]["detail"]

    # the feed (its first version is read from the table's files: not copied) and the history see key 2's
    # delete at the reload's base, from the reload
    feed = _rows(storage, table_set(table).changes.uri(storage))
    assert sorted((r["id"], r["_change_type"]) for r in feed) == [
        (1, "update_postimage"), (1, "update_preimage"), (2, "delete"), (3, "update_postimage"),
        (3, "update_preimage")]
    history = sorted(_rows(storage, table_set(table).history.uri(storage)), key=lambda r: (r["id"], r["_sequence"]))
    two = [(r["_operation"], r["_source_file"].removeprefix(days)) for r in history if r["id"] == 2]
    assert two == [("L", "day=2024-04-01/20240401-120000000.csv"), ("D", "day=2024-04-01/20240403-120000000.csv")]

    # a CDC change older than the reload, of a key the table no longer knows, in the reloaded partition: it loses;
    # one in the other partition (no snapshot of it since) applies; key 2 stays deleted (its tombstone is newer)
    storage.put_bytes(f"{cdc}20240402-130000000.csv", b"I,9,2024-04-01,90\nI,10,2024-04-02,100\nU,2,2024-04-01,21\n")
    report = apply_pending(table, storage, spark, "run-3")
    (changes,) = report.files
    assert (changes.rows_applied, changes.rows_superseded) == (1, 2)
    assert _table(storage, table) == {1: (first, 11), 3: (first, 30), 4: (second, 40), 5: (second, 50),
                                      10: (second, 100)}
    ledger = {e["source_file"]: e["status"] for e in Ledger(storage).entries(name).to_pylist()}
    assert ledger[f"{days}loose.csv"] == "rejected"


def test_a_partition_snapshot_is_guarded_against_its_partition(storage: LakeStorage, spark: SparkSession) -> None:
    name = f"sales_{uuid.uuid4().hex[:6]}"
    table = _declared(name, "INT")
    days = table.sources[0].prefix
    storage.put_bytes(f"{days}day=1/20240401-120000000.csv", b"1,1,10\n2,1,20\n3,1,30\n4,1,40\n")
    storage.put_bytes(f"{days}day=2/20240401-120000000.csv", b"5,2,50\n")
    apply_pending(table, storage, spark, "run-1")
    # day 1 shrinking from 4 rows to 1 is held (the table as a whole would shrink by 3 of 5: judged per
    # partition either way); day 2 again with its one row publishes; an empty day 3 is held
    storage.put_bytes(f"{days}day=1/20240402-120000000.csv", b"1,1,11\n")
    storage.put_bytes(f"{days}day=2/20240402-120000000.csv", b"5,2,51\n")
    storage.put_bytes(f"{days}day=3/20240402-120000000.csv", b"")
    report = apply_pending(table, storage, spark, "run-2")
    states = {f.source_file.removeprefix(days).split("/")[0]: (f.status, f.detail or "") for f in report.files}
    assert states["day=1"][0] == "held" and "the partition day=1" in states["day=1"][1], states
    assert states["day=2"] == ("applied", "")
    assert states["day=3"][0] == "rejected" and states["day=3"][1].startswith("bad_header: the file is empty")
    assert _table(storage, table) == {1: (1, 10), 2: (1, 20), 3: (1, 30), 4: (1, 40), 5: (2, 51)}


@pytest.mark.parametrize("text, message", [
    ("  - {prefix: raw/x/c/, kind: cdc, partition: day}", "partition day: a partition is for a snapshot source"),
    ("  - {prefix: raw/x/d/, kind: snapshot, partition: dat}", "partition dat is not among the columns"),
    ("  - {prefix: raw/x/d/, kind: snapshot, partition: amount}", "partition amount: the column must be one of"),
])
def test_a_partition_is_a_column_a_folder_can_name(text: str, message: str) -> None:
    with pytest.raises(DeclarationError, match=message):
        parse(f"""
name: bad
group: sales
keys: [id]
columns:
  - {{name: id, type: BIGINT}}
  - {{name: day, type: DATE}}
  - {{name: amount, type: "DECIMAL(9,2)"}}
sources:
{text}
""", "bad.yaml")


# --- the model ---------------------------------------------------------------------------------------

PARTITIONS = (1, 2, None)


@dataclass(frozen=True)
class Drop:
    """One object: a CDC file (rows of (op, key, partition, amount)) or a snapshot of `partition`."""

    time: int
    rows: tuple[tuple[str, int, int | None, int], ...]
    partition: int | None = None
    snapshot: bool = False


@st.composite
def drops(draw) -> list[Drop]:
    count = draw(st.integers(2, 8))
    times = draw(st.permutations(range(1, count + 1)))
    out = []
    for time in times:
        if draw(st.booleans()):
            partition = draw(st.sampled_from(PARTITIONS))
            keys = draw(st.lists(st.integers(1, 2), unique=True, max_size=2))
            out.append(Drop(time, tuple(("L", k, partition, draw(st.integers(0, 9))) for k in keys), partition, True))
        else:
            rows = draw(st.lists(st.tuples(st.sampled_from("IUUD"), st.integers(1, 2), st.sampled_from(PARTITIONS),
                                           st.integers(0, 9)), min_size=1, max_size=3))
            out.append(Drop(time, tuple(rows)))
    return out


@dataclass
class Model:
    """The table as partitions.py documents it: key -> (partition, amount, sequence)."""

    table: dict[int, tuple[int | None, int, tuple]] = field(default_factory=dict)
    tombs: dict[int, tuple] = field(default_factory=dict)
    floors: dict[int | None, tuple] = field(default_factory=dict)

    def run(self, batch: list[Drop]) -> None:
        events = [(k, op, p, a, (d.time, line)) for d in batch for line, (op, k, p, a) in enumerate(d.rows, 1)]
        implied = []
        for drop in (d for d in batch if d.snapshot):
            base = (drop.time, 0)
            held = {k for _, k, _, _ in drop.rows}
            for key in {*self.table, *self.tombs, *(e[0] for e in events)} - held:
                states = [(s, p, op != "D") for k, op, p, _, s in events if k == key and s < base]
                if key in self.table and self.table[key][2] < base:
                    states.append((self.table[key][2], self.table[key][0], True))
                if key in self.tombs and self.tombs[key] < base:
                    states.append((self.tombs[key], None, False))
                if states and max(states)[2] and max(states)[1] == drop.partition:
                    implied.append((key, "D", None, None, base))
        events += implied
        known = {*self.table, *self.tombs}
        events = [e for e in events if e[0] in known or e[1] == "D" or
                  not (e[2] in self.floors and e[4] < self.floors[e[2]])]
        for key in {e[0] for e in events}:
            newest = max((e for e in events if e[0] == key), key=lambda e: e[4])
            existing = max([*([self.table[key][2]] if key in self.table else []),
                            *([self.tombs[key]] if key in self.tombs else [])], default=None)
            if existing is not None and newest[4] < existing:
                continue
            if newest[1] == "D":
                self.table.pop(key, None)
                self.tombs[key] = newest[4]
            else:
                self.table[key] = (newest[2], newest[3], newest[4])
        for drop in (d for d in batch if d.snapshot):
            self.floors[drop.partition] = max(self.floors.get(drop.partition, (0, 0)), (drop.time, 0))


def _object(prefix: str, drop: Drop) -> tuple[str, bytes]:
    stamp = f"20240101-{drop.time:06d}000.csv"
    text = "".join(f"{'' if drop.snapshot else op + ','}{k},{'' if p is None else p},{a}\n" for op, k, p, a in drop.rows)
    if not drop.snapshot:
        return f"{prefix}{stamp}", text.encode()
    folder = "__HIVE_DEFAULT_PARTITION__" if drop.partition is None else drop.partition
    return f"{prefix}day={folder}/{stamp}", text.encode()


#: Cases random draws seldom reach: a key moved out of the partition before its snapshot keeps its
#: row (moved by the run, or by a row of the table newer than the run's late change); a deleted key
#: back in another partition; a partition's floor against a late change.
MOVED = [Drop(1, (("I", 1, 1, 5), ("I", 2, 1, 5))), Drop(2, (("U", 1, 2, 6),)), Drop(3, (("L", 2, 1, 7),), 1, True)]
BACK = [Drop(1, (("I", 1, None, 5),)), Drop(2, (("D", 1, None, 5), ("I", 1, 2, 6))),
        Drop(3, (), None, True), Drop(4, (("L", 2, None, 7),), None, True)]
MOVED_BEFORE = [Drop(5, (("I", 1, 2, 5),)), Drop(3, (("I", 1, 1, 6),)), Drop(7, (("L", 2, 1, 7),), 1, True)]
LATE = [Drop(4, (("L", 1, 1, 5),), 1, True), Drop(2, (("I", 2, 1, 6), ("I", 3, 2, 7), ("U", 1, 1, 8)))]


#: Where a run may be killed (a real SIGKILL, helpers/killed_run.py): with its manifest staged, just
#: before its table commit; just after the commit; at its ledger write, everything else written.
SEAMS = ("stage", "table-commit", "ledger")


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
@SETTINGS
@given(drawn=drops(), cuts=st.lists(st.integers(0, 8), max_size=2),
       partitioning=st.sampled_from(["", "day", "truncate(2, day)"]),
       kill=st.one_of(st.none(), st.tuples(st.integers(0, 1), st.sampled_from(SEAMS))))
@example(drawn=MOVED, cuts=[], partitioning="day", kill=None).via("a key moved away")
@example(drawn=MOVED, cuts=[1, 2], partitioning="", kill=(1, "table-commit")).via("a key moved away, run by run")
@example(drawn=MOVED_BEFORE, cuts=[1], partitioning="day", kill=(0, "stage")) \
    .via("a key the table moved away before a late change")
@example(drawn=BACK, cuts=[], partitioning="truncate(2, day)", kill=(0, "ledger")).via("a deleted key back elsewhere")
@example(drawn=LATE, cuts=[1], partitioning="", kill=None).via("a late change against a partition's floor")
def test_partition_snapshots_and_changes_match_the_model(storage: LakeStorage, spark: SparkSession, tmp_path: Path,
                                                         drawn: list[Drop], cuts: list[int], partitioning: str,
                                                         kill: tuple[int, str] | None, table_format: str) -> None:
    """`kill`: the run (by number) killed at a seam, in a child process; the next run finishes it
    (or, killed before its commit, applies its objects again), so the lake ends as the model does:
    the table, each object applied once in the ledger, and an SCD2 history whose current rows are
    the table."""
    # the table partitioned by the snapshots' column, by a transform of it (Iceberg's; on Delta the column
    # itself), or not (a snapshot of one day of a table kept whole)
    if table_format == "delta" and "(" in partitioning:
        partitioning = "day"
    name = f"parts_{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{name}.yaml"
    path.write_text(_declaration(name, "INT", "guard: {max_shrink: 1}", table_format, partitioning))
    table = read_file(path)
    days, cdc = (s.prefix for s in table.sources)
    model = Model()
    bounds = sorted({0, len(drawn), *(min(c, len(drawn)) for c in cuts)})
    carried: set[str] = set()  # the objects of a killed run, which the next run records
    runs = list(enumerate(zip(bounds, bounds[1:])))
    for number, (start, end) in [*runs, (len(runs), (len(drawn), len(drawn)))]:  # then one run with nothing new
        batch = drawn[start:end]
        for drop in batch:
            storage.put_bytes(*_object(days if drop.snapshot else cdc, drop))
        # an empty object is refused whole (DMS writes none: an upload cut short): nor does the model see it
        objects = {_object(days if d.snapshot else cdc, d)[0] for d in batch if d.rows}
        model.run([d for d in batch if d.rows])
        if kill is not None and kill[0] == number:
            if killed(storage, "declared", kill[1], str(path)) == KILLED:  # 0: it had nothing to commit
                carried = objects
            continue
        report = apply_pending(table, storage, spark, f"run-{number}")
        applied = {f.source_file for f in report.files if f.status == "applied"}
        assert applied == objects | carried
        carried = set()
    expected = {k: (p, a) for k, (p, a, _) in model.table.items()}
    tables = table_set(table)
    if table_format == "iceberg":  # read by pyiceberg
        found = iceberg.open_table(storage, tables.table)
        rows = found.scan().to_arrow().to_pylist() if found is not None and found.current_snapshot() else []
    else:
        rows = _rows(storage, tables.table.uri(storage)) if model.table or model.tombs else []
    assert {r["id"]: (r["day"], r["amount"]) for r in rows} == expected
    entries = Ledger(storage).entries(table.table_name).to_pylist()
    recorded = [e["source_file"] for e in entries if e["status"] == "applied"]
    assert sorted(recorded) == sorted({_object(days if d.snapshot else cdc, d)[0] for d in drawn if d.rows})
    history = open_table(storage, tables.history)
    current = history.to_pyarrow_table().to_pylist() if history is not None else []
    assert {r["id"]: (r["day"], r["amount"]) for r in current if r["is_current"]} == expected
    assert not storage.list_objects(f"staging/{table.table_name}/")  # every stage cleared

