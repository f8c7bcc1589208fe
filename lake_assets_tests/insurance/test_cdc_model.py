"""Property test: the pipeline agrees with a small pure-Python model of the CDC semantics.

The model orders changes per key by sequence, as `APPLY CHANGES ... SEQUENCE BY` does:
a change is (file time, part, delivery, row), compared as a tuple; a key takes a change
only if it is at least as new as the key's row and its tombstone; within a run the newest
change per key wins and the others are superseded; D deletes and leaves a tombstone; a
full load is a snapshot as of its stamp (here: as of its arrival, before every change):
its rows are changes, every other key is deleted as of the stamp unless its snapshot row
was quarantined; a snapshot with rejected rows or no rows is held until approved. Files are
delivered in random order across runs, and some are re-delivered later with new content
(a later delivery of a name follows the earlier one). Invalid rows are quarantined. Every
commit strategy (merge.Strategy: the first commit, then a narrow replace over key ranges
or a whole rewrite, forced per example) is judged. The derived change feed, replayed from
version 0 onto an empty table, reproduces every version. The model also keeps the SCD2
history on the sequence axis (DLT's `STORED AS SCD TYPE 2`): per key, every change it kept
(winners, changes superseded in their run, late changes, an older snapshot's rows in a run that
applies several; not those the floor supersedes for a key never known), each snapshot's delete
at its stamp of each key it covers that was live just before it (whether the snapshot deletes it
or a newer change keeps it; every snapshot of a run, not only the newest), and a delete at
the tombstone of a key without a row closing a late change older than it (unless the key was
not live there), a version valid until the key's next change; `insurance_history` must equal
it row for row.

A second generator writes files the way an AWS DMS task does (its S3 target settings drawn
per task): a full load split into parts named with DMS's hexadecimal counter (one snapshot,
its parts in counter order), files with a header line or without (AddColumnName), the
operation in full-load records (IncludeOpForFullLoad) or missing from CDC records
(CdcInsertsOnly), DMS's commit-time column (TimestampColumnName), CDC names with nine or ten
digits after the dash, in date folders, and re-uploads of a file under another name with
the same time (ordered by their keys' origin, whichever runs they land in).
"""

import copy
import datetime as dt
import hashlib
import re
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lake_assets.core.formats.delta import open_table, to_arrow
from lake_assets_tests.helpers.insurance_tables import DATA_COLUMN_NAMES, Reason
from lake_assets.core.apply import commit as merge
from lake_assets_tests.helpers.insurance import apply_pending, approve_held
from lake_assets.core.ledger import APPLIED, HELD, REJECTED, REVERTED, Ledger
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.insurance_tables import INSURANCE, INSURANCE_QUARANTINE
from lake_assets_tests.conftest import make_storage
from lake_assets_tests.helpers.changes import assert_history_invariants, history_versions, replay

HEADER = ",".join(DATA_COLUMN_NAMES)
FULL = "raw/fullload/full-load.csv"
FULL2 = "raw/fullload/full-load-2.csv"
ARRIVAL = ("0" * 23, 900_000)  # the stamp of a full load that arrives before any change
NO_ORIGIN = "0" * 16  # a snapshot's floor: before every row of its time and part
TIMESTAMP_NAME = "dms_commit_ts"  # what a header calls DMS's timestamp column (not told to the lake)
SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@dataclass(frozen=True)
class Line:
    """One generated record: its CSV text and what the model makes of it."""

    text: str
    kind: str  # upsert | delete | bad
    key: int | None = None
    row: dict | None = None  # the table row an upsert leaves behind
    reason: str | None = None


# --- generators ------------------------------------------------------------------------

KEYS = st.integers(1, 6)
LOCATIONS = [("Urban", "Urban"), ("", None), (" Rural ", "Rural"), ('"Rural, far"', "Rural, far"),
             ('"two\nlines"', "two\nlines"), ('"say ""hi"""', 'say "hi"')]
DATES = [("2024-01-31", dt.date(2024, 1, 31)), ("", None), ("2024-02-29", dt.date(2024, 2, 29)),
         ("1999-12-31", dt.date(1999, 12, 31))]
FLAGS = [("Y", "Y"), ("N", "N"), ("y", "Y"), (" n ", "N")]


@st.composite
def data_fields(draw, key: int) -> tuple[str, dict]:
    """The nine data fields of a valid row for `key`, and the row the table should hold."""
    key_text = draw(st.sampled_from([str(key), f" {key} ", f"0{key}", f"+{key}"]))
    location, location_value = draw(st.sampled_from(LOCATIONS))
    date, date_value = draw(st.sampled_from(DATES))
    flood, flood_value = draw(st.sampled_from(FLAGS))
    value = draw(st.none() | st.integers(-(2**31), 2**31 - 1))
    value_text = "" if value is None else (draw(st.sampled_from(["", "+"])) if value >= 0 else "") + str(value)
    text = f"{key_text},{date},{location},CA,West,{value_text},Retail,N,{flood}"
    return text, {
        "policy_id": key, "expiry_date": date_value, "location_name": location_value, "state_code": "CA",
        "region_name": "West", "insured_value": value, "business_type": "Retail",
        "earthquake_coverage": "N", "flood_coverage": flood_value,
    }


def bad_rows(key: int, op: str) -> list[tuple[Reason, str]]:
    """Invalid records (with `op` prepended for CDC files; '' for full loads)."""
    p = f"{op}," if op else ""
    return [
        (Reason.WRONG_FIELD_COUNT, f"{p}{key},2024-01-31,Urban,CA"),
        (Reason.BAD_DATE, f"{p}{key},2024-02-30,Urban,CA,West,1,Retail,N,Y"),
        (Reason.BAD_DATE, f"{p}{key},2024-13-45,Urban,CA,West,1,Retail,N,Y"),
        (Reason.BAD_INTEGER, f"{p}{key},2024-01-31,Urban,CA,West,lots,Retail,N,Y"),
        (Reason.BAD_INTEGER, f"{p}{key},2024-01-31,Urban,CA,West,2147483648,Retail,N,Y"),
        (Reason.BAD_INTEGER, f"{p}{key}x,2024-01-31,Urban,CA,West,1,Retail,N,Y"),
        (Reason.BAD_FLAG, f"{p}{key},2024-01-31,Urban,CA,West,1,Retail,N,maybe"),
        (Reason.EMPTY_KEY, f"{p},2024-01-31,Urban,CA,West,1,Retail,N,Y"),
    ]


@st.composite
def cdc_line(draw, inserts_only: bool = False) -> Line:
    """A CDC record; with `inserts_only` (DMS's CdcInsertsOnly), an insert without its operation."""
    key = draw(KEYS)
    if inserts_only:
        if draw(st.integers(0, 7)) == 0:
            reason, text = draw(st.sampled_from(bad_rows(key, "")))
            return Line(text, "bad", reason=reason.value)
        text, row = draw(data_fields(key))
        return Line(text, "upsert", key, row)
    kind = draw(st.sampled_from(["upsert"] * 5 + ["delete"] * 3 + ["bad"]))
    if kind == "bad":
        op = draw(st.sampled_from(["I", "U"]))
        choices = bad_rows(key, op) + [(Reason.UNKNOWN_OPERATION, f"X,{key},2024-01-31,Urban,CA,West,1,Retail,N,Y"),
                                       (Reason.BAD_INTEGER, "D,abc,,,,,,,,")]
        reason, text = draw(st.sampled_from(choices))
        return Line(text, "bad", reason=reason.value)
    if kind == "delete":
        op = draw(st.sampled_from(["D", "d"]))
        rest = draw(st.sampled_from([f"{key},,,,,,,,", f"{key},2024-13-45,x,,,lots,,maybe,"]))
        return Line(f"{op},{rest}", "delete", key)
    op = draw(st.sampled_from(["I", "U", "i", "u"]))
    text, row = draw(data_fields(key))
    return Line(f"{op},{text}", "upsert", key, row)


@st.composite
def full_load_line(draw) -> Line:
    key = draw(KEYS)
    if draw(st.integers(0, 7)) == 0:
        reason, text = draw(st.sampled_from(bad_rows(key, "")))
        return Line(text, "bad", reason=reason.value)
    text, row = draw(data_fields(key))
    return Line(text, "upsert", key, row)


NEWLINES = st.sampled_from(["\n", "\r\n"])
FILE = st.tuples(st.lists(cdc_line(), max_size=6), NEWLINES)
FULL_LOAD = st.none() | st.tuples(st.lists(full_load_line(), max_size=5), NEWLINES)


@dataclass(frozen=True)
class Format:
    """How a DMS task writes a file: a header line (AddColumnName), DMS's operation field (a
    CDC record's own, or `I` first in a full-load record: IncludeOpForFullLoad), DMS's
    commit-time column (TimestampColumnName: after the operation, before the data)."""

    header: bool = False
    operation: bool = True
    timestamp: bool = False


def render(lines: list[Line], newline: str, header: bool = False, fmt: Format | None = None,
           full_load: bool = False) -> bytes:
    """The bytes of a file of `lines`: by default a CDC file's or, with `header`, a full load's."""
    fmt = fmt or Format(header=header, operation=not full_load and not header)
    head = (["Op"] if fmt.operation else []) + ([TIMESTAMP_NAME] if fmt.timestamp else []) + [HEADER]
    texts = [",".join(head)] if fmt.header else []
    for number, line in enumerate(lines):
        text = f"I,{line.text}" if fmt.operation and full_load else line.text
        if fmt.timestamp:  # a commit time per record, after the operation
            stamp = f"2024-04-01 09:{number % 60:02d}:00.{number * 7919 % 10**6:06d}"
            op, rest = text.split(",", 1) if fmt.operation else ("", text)
            text = f"{op},{stamp},{rest}" if fmt.operation else f"{stamp},{rest}"
        texts.append(text)
    return "".join(t + newline for t in texts).encode()


def line_numbers(lines: list[Line], header: bool) -> list[int]:
    """The physical line on which each record starts (quoted values may span lines)."""
    numbers, at = [], 2 if header else 1
    for line in lines:
        numbers.append(at)
        at += 1 + line.text.count("\n")
    return numbers


# --- the model -------------------------------------------------------------------------

Seq = tuple  # (file time, part, origin, delivery, row): compared as a tuple


@dataclass(frozen=True)
class Delivery:
    """One object put into the raw zone: a CDC file (time index) or the full load."""

    name: str
    lines: list[Line]
    newline: str
    time: str | None  # 23 digits; None for a full load (stamped as of its arrival)
    fmt: Format | None = None  # None: a CDC file without header, a full load with one
    group: str | None = None  # a full-load part's snapshot (DMS's parts of one folder), else its name

    @property
    def header(self) -> bool:
        return self.fmt.header if self.fmt else self.time is None

    @property
    def snapshot(self) -> str:
        return self.group or self.name

    def body(self) -> bytes:
        return render(self.lines, self.newline, self.header, self.fmt, full_load=self.time is None)


def cdc_name(index: int) -> tuple[str, str]:
    """The object key and file time (23 digits) of the index-th CDC file (DMS naming)."""
    time = f"2024{1 + index // 28:02d}{1 + index % 28:02d}090000000"
    return f"raw/cdcload/{time[:8]}-{time[8:]}.csv", time.ljust(23, "0")


def origin_of(name: str) -> str:
    """The origin of an object's sequences: the SHA-256 of its key (16 hex digits); a DMS
    full-load part's hex counter first (8 digits), then 8 of the hash."""
    digest = hashlib.sha256(name.encode()).hexdigest()
    part = re.fullmatch(r"LOAD([0-9A-F]+)\.csv", name.rpartition("/")[2])
    return digest[:16] if part is None else f"{int(part.group(1), 16):08x}{digest[:8]}"


def protected_key(line: Line) -> int | None:
    """The key a quarantined full-load row names, if its first field is one."""
    first = line.text.split(",", 1)[0].strip()
    return int(first) if first.lstrip("+-").isdigit() and len(first.lstrip("+-")) <= 10 \
        and -(2**31) <= int(first) < 2**31 else None


class Model:
    def __init__(self, max_shrink: float = 0.5) -> None:
        self.rows: dict[int, tuple[Seq, dict]] = {}
        self.tombs: dict[int, Seq] = {}
        self.floor: Seq | None = None  # the newest applied snapshot's stamp
        self.newest: Seq | None = None  # the newest file applied or held so far
        self.max_shrink = max_shrink
        self.seen: dict[str, int] = {}  # deliveries per name
        self.ledger: dict[tuple[str, int], tuple] = {}  # (name, delivery) -> counts
        self.parked: Counter = Counter()
        self.held: list[tuple[Delivery, int, Seq]] = []
        self.changes: dict[int, dict[Seq, dict | None]] = {}  # per key, every change the history keeps
        self.items: dict[tuple[str, int], tuple[Delivery, int, Seq | None]] = {}  # each delivery and its stamp

    def arrival(self) -> Seq:
        """The stamp of a snapshot with no time of its own: just after the newest file."""
        if self.newest is None:
            return ARRIVAL + (NO_ORIGIN, 0, 0)
        return (self.newest[0], max(ARRIVAL[1], self.newest[1] + 1), NO_ORIGIN, 0, 0)

    def run(self, deliveries: list[Delivery], approve: bool = False, reapply: bool = False) -> None:
        """One run of what is pending: `deliveries` (new content), the held snapshots when
        `approve`d, and with `reapply` the deliveries a restore reverted that are still the
        raw zone's content of their name (each with the delivery and stamp it had)."""
        files: list[tuple[Delivery, int, Seq | None]] = []
        arrived: dict[str, Seq] = {}  # each snapshot's stamp (its parts share it)
        for item in sorted(deliveries, key=lambda d: (d.time is not None, d.snapshot, d.name)):  # snapshots in order
            self.seen[item.name] = self.seen.get(item.name, 0) + 1
            base = None
            if item.time is None:  # as of its arrival: after everything applied, held or arrived before
                if item.snapshot not in arrived:
                    arrived[item.snapshot] = self.newest = self.arrival()
                base = arrived[item.snapshot]
            files.append((item, self.seen[item.name], base))
            self.items[(item.name, self.seen[item.name])] = files[-1]
        released = self.held if approve else []
        self.held = [] if approve else self.held
        if reapply:  # a reverted snapshot is not held again: it goes the way of a released one
            released = released + [self.items[k] for k, entry in sorted(self.ledger.items())
                                   if entry[0] == REVERTED and k[1] == self.seen[k[0]]]
        for item, delivery, _ in files:
            for line, number in zip(item.lines, line_numbers(item.lines, item.header)):
                if line.kind == "bad":  # a released snapshot was quarantined when held
                    self.parked[(item.name, delivery, number, line.reason)] += 1

        events: list[tuple[Seq, Line, tuple[str, int]]] = []
        parts: dict[str, list[tuple[Delivery, int, Seq]]] = {}  # each snapshot's parts
        for item, delivery, base in files + released:
            valid = [(record, line) for record, line in enumerate(item.lines, start=2 if item.header else 1)
                     if line.kind != "bad"]
            if base is None:
                events += [((item.time, 0, origin_of(item.name), delivery, record), line, (item.name, delivery))
                           for record, line in valid]
                continue
            parts.setdefault(item.snapshot, []).append((item, delivery, base))
        snapshots = []
        for group in parts.values():
            base = group[0][2]
            valid = [((base[0], base[1], origin_of(item.name), delivery, record), line, (item.name, delivery))
                     for item, delivery, _ in group
                     for record, line in enumerate(item.lines, start=2 if item.header else 1) if line.kind != "bad"]
            keys = {line.key for _, line, _ in valid}
            bad = sum(line.kind == "bad" for item, _, _ in group for line in item.lines)
            after = len(keys | {k for k, (seq, _) in self.rows.items() if seq >= base})
            suspicious = bad or not valid or (self.rows and after < (1 - self.max_shrink) * len(self.rows))
            if suspicious and group[0] not in released:
                for item, delivery, _ in group:
                    self.held.append((item, delivery, base))
                    own = sum(line.kind == "bad" for line in item.lines)
                    self.ledger[(item.name, delivery)] = (HELD, len(item.lines), 0, 0, own)
                continue
            protected = {protected_key(line) for item, _, _ in group for line in item.lines
                         if line.kind == "bad"} - {None}
            snapshots.append((base, valid, keys, protected))
        snapshots.sort(key=lambda s: s[0])
        snapshot = snapshots[-1] if snapshots else None  # the newest decides the table
        for each in snapshots:  # every one's rows are changes
            events += each[1]

        existing = {k: max([s for s in (self.rows.get(k, (None,))[0], self.tombs.get(k)) if s is not None])
                    for k in set(self.rows) | set(self.tombs)}
        newest: dict[int, tuple[Seq, Line, tuple]] = {}
        kept: dict[int, list[Seq]] = {}  # per key, the sequences of its changes the run keeps
        for seq, line, origin in events:
            if line.key not in existing and self.floor is not None and seq < self.floor:
                continue  # older than the last snapshot, for a key it removed
            self.changes.setdefault(line.key, {})[seq] = line.row if line.kind == "upsert" else None
            kept.setdefault(line.key, []).append(seq)
            if line.key not in newest or seq > newest[line.key][0]:
                newest[line.key] = (seq, line, origin)
        winners = {k: w for k, w in newest.items() if k not in existing or w[0] >= existing[k]}
        # a late change of a key the table does not hold, older than its tombstone: closed there
        closing = {(key, self.tombs[key]) for key, seqs in kept.items() if key not in self.rows and key in self.tombs
                   for seq in seqs if seq < self.tombs[key]}
        known = set(existing) | set(winners)
        for base, _, inside, protected in snapshots[:-1]:  # an older one's delete, if the key was live just before
            closing |= {(key, base) for key in known - inside - protected}
        if snapshot is not None:
            base, _, inside, protected = snapshot
            for key in known - inside - protected:
                closing.add((key, base))  # the snapshot's delete, if the key was live just before
                latest = max([s for s in (existing.get(key), winners.get(key, (None,))[0]) if s is not None])
                if latest < base:
                    winners.pop(key, None)
                    self.rows.pop(key, None)
                    self.tombs[key] = max(self.tombs.get(key, base), base)
            self.floor = max(self.floor or base, base)
        for key, (seq, line, _) in winners.items():
            if line.kind == "delete":
                self.rows.pop(key, None)
                self.tombs[key] = max(self.tombs.get(key, seq), seq)
            else:
                self.rows[key] = (seq, line.row)
        for key, seq in sorted(closing):  # in sequence order: a delete right after another closes nothing
            changes = self.changes.get(key, {})
            before = [s for s in changes if s < seq]
            if seq not in changes and before and changes[max(before)] is not None:
                changes[seq] = None

        applied = Counter(origin for _, _, origin in winners.values())
        for item, delivery, base in files + released:
            if any(held[:2] == (item, delivery) for held in self.held):
                continue
            valid = sum(line.kind != "bad" for line in item.lines)
            bad = len(item.lines) - valid
            status = REJECTED if valid == 0 and bad and base is None else APPLIED  # a published snapshot applied
            done = applied[(item.name, delivery)]
            self.ledger[(item.name, delivery)] = (status, len(item.lines), done, valid - done, bad)
            if status == APPLIED:
                stamp = base if base is not None else (item.time, 0, origin_of(item.name), delivery, 0)
                self.newest = max(self.newest or stamp, stamp)

    def restored(self, then: "Model") -> "Model":
        """The model after a restore to the version `then` was taken at: the table, its
        tombstones, floor and history as they were then (the history those runs wrote: a
        delivery applied again since, with all its rows superseded, keeps the versions of
        its first application); deliveries applied since are `reverted` (counts kept),
        reverted ones applied then are `applied` again. A restore that reverts and
        reinstates nothing leaves the tombstones and history as they are. What arrived, was quarantined or
        is held stays as it is now."""
        back = copy.deepcopy(then)
        applied_then = {k for k, entry in then.ledger.items() if entry[0] == APPLIED}
        back.ledger = {}
        for k, (status, *counts) in self.ledger.items():
            if status == APPLIED and k not in applied_then:
                status = REVERTED
            elif status == REVERTED and k in applied_then:
                status = APPLIED
            back.ledger[k] = (status, *counts)
        if back.ledger == self.ledger:
            back.tombs, back.changes = dict(self.tombs), copy.deepcopy(self.changes)
        back.seen, back.parked, back.held = dict(self.seen), self.parked.copy(), list(self.held)
        back.newest, back.items = self.newest, dict(self.items)
        return back

    def table(self) -> dict[int, dict]:
        return {k: row for k, (_, row) in self.rows.items()}

    def sequences(self) -> dict[int, str]:
        return {k: text(s) for k, (s, _) in self.rows.items()}

    def history(self) -> list[tuple]:
        """SCD2 on the sequence axis: per key, each change in sequence order; a version is
        valid until the next change, a delete at no point (from = to), the last version is
        current: (key, from, to, is_current, row or None for a delete)."""
        rows = []
        for key, changes in sorted(self.changes.items()):
            order = sorted(changes)
            for seq, after in zip(order, order[1:] + [None]):
                row = changes[seq]
                to = seq if row is None else after
                rows.append((key, text(seq), None if to is None else text(to), row is not None and to is None, row))
        return rows


def text(seq: Seq) -> str:
    return f"{seq[0]}.{seq[1]:06d}.{seq[2]}.{seq[3]:04d}.{seq[4]:010d}"


# --- running it through the pipeline ---------------------------------------------------

#: Each strategy a later commit may take, and the REWRITE_FRACTION that forces it.
FORCING = {merge.Strategy.NARROW: float("inf"), merge.Strategy.REWRITE: 0.0}


def check(base: LakeStorage, spark: SparkSession, full, runs: list[list[Delivery]],
          strategy: merge.Strategy) -> None:
    """Run one example in a bucket of its own, dropped afterwards: SeaweedFS gives every
    bucket its own volumes, and a server runs out of them after some dozens of buckets."""
    storage = make_storage(base.endpoint_url, Path(base.home), f"h-{uuid.uuid4().hex[:12]}")
    saved = merge.REWRITE_FRACTION
    merge.REWRITE_FRACTION = FORCING[strategy]
    try:
        _check(storage, spark, full, runs, strategy)
    finally:
        merge.REWRITE_FRACTION = saved
        drop_bucket(storage)


def drop_bucket(storage: LakeStorage) -> None:
    try:
        storage.delete_prefix("")
        storage.get_client().delete_bucket(Bucket=storage.bucket)
    except Exception:  # noqa: BLE001 - best effort: a leftover bucket only costs disk
        pass


def _check(storage: LakeStorage, spark: SparkSession, full, runs: list[list[Delivery]],
           strategy: merge.Strategy) -> None:
    model = Model()
    deliveries: dict[tuple[str, str], int] = {}  # (name, ETag) -> its delivery number
    contents: dict[str, set[bytes]] = {}  # every body put under each name
    if full is not None:
        runs = [[Delivery(FULL, full[0], full[1], None), *runs[0]], *runs[1:]]
    for index, run in enumerate(runs):
        put = []
        for item in reversed(run):  # uploaded in no particular order
            body = item.body()
            if body in contents.setdefault(item.name, set()):
                continue  # bytes put before are that delivery (same ETag): new to nobody
            contents[item.name].add(body)
            etag = storage.put_bytes(item.name, body)
            deliveries[(item.name, etag)] = 1 + sum(name == item.name for name, _ in deliveries)
            put.append(item)
        report = apply_pending(storage, spark, f"run-{index}")
        assert {c.strategy for c in report.commits} <= {merge.Strategy.CREATE, strategy}
        model.run(put[::-1])
    if model.held:  # approve the held snapshots and publish them
        approve_held(storage, None, "approve")
        apply_pending(storage, spark, "run-approved")
        model.run([], approve=True)
    assert_lake_matches(storage, model, deliveries)


def assert_lake_matches(storage: LakeStorage, model: Model, deliveries: dict[tuple[str, str], int]) -> None:
    """The table, its `_sequence`s, the ledger's latest entry of every delivery, the
    quarantine, the feed replayed from version 0 and the SCD2 history equal the model's."""
    delta = open_table(storage, INSURANCE)
    rows = to_arrow(delta).to_pylist() if delta else []
    assert len({r["policy_id"] for r in rows}) == len(rows), "duplicate keys in the table"
    assert {r["policy_id"]: {c: r[c] for c in DATA_COLUMN_NAMES} for r in rows} == model.table()
    assert {r["policy_id"]: r["_sequence"] for r in rows} == model.sequences()

    latest = {}
    for e in Ledger(storage).entries("insurance").to_pylist():
        latest[(e["source_file"], deliveries[(e["source_file"], e["source_etag"])])] = e
    actual = {key: (e["status"], e["rows_in_file"], e["rows_applied"], e["rows_superseded"], e["rows_quarantined"])
              for key, e in latest.items()}
    assert actual == model.ledger
    for status, in_file, applied, superseded, quarantined in actual.values():
        assert in_file == applied + superseded + quarantined or status == HELD

    quarantine = open_table(storage, INSURANCE_QUARANTINE)
    found = Counter()
    if quarantine is not None:
        for q in to_arrow(quarantine).to_pylist():
            delivery = deliveries[(q["source_file"], q["source_etag"])]
            found[(q["source_file"], delivery, q["line_number"], q["reason"])] += 1
    assert found == model.parked

    # the change feed: replayed from version 0 onto an empty table, up to each version, it
    # gives that version of the table; and the SCD2 history's invariants hold
    for version in range(delta.version() + 1 if delta else 0):
        at = to_arrow(open_table(storage, INSURANCE, version=version)).select(DATA_COLUMN_NAMES).to_pylist()
        assert replay(storage, version) == {r["policy_id"]: r for r in at}, f"feed replay up to v{version}"
    assert replay(storage) == model.table()
    assert history_versions(storage) == model.history()
    assert_history_invariants(storage)


@st.composite
def deliveries(draw):
    """CDC files with distinct times, delivered across runs in random order, some of them
    re-delivered with new content in a later run."""
    files = draw(st.lists(FILE, min_size=1, max_size=5))
    count = draw(st.integers(1, 3))
    runs: list[list[Delivery]] = [[] for _ in range(count)]
    for index, (lines, newline) in enumerate(files):
        name, time = cdc_name(index)
        at = draw(st.integers(0, count - 1))
        runs[at].append(Delivery(name, lines, newline, time))
        if at + 1 < count and draw(st.integers(0, 3)) == 0:
            again, newline = draw(FILE)
            runs[draw(st.integers(at + 1, count - 1))].append(Delivery(name, again, newline, time))
    if draw(st.booleans()):  # a second snapshot, as of its arrival (in the first run: two in one run)
        lines, newline = draw(st.tuples(st.lists(full_load_line(), max_size=5), NEWLINES))
        runs[draw(st.integers(0, count - 1))].append(Delivery(FULL2, lines, newline, None))
    return runs


@SETTINGS
@given(full=FULL_LOAD, runs=deliveries(), strategy=st.sampled_from(sorted(FORCING)))
def test_shuffled_and_late_deliveries_match_the_model(storage: LakeStorage, spark: SparkSession, full, runs,
                                                       strategy) -> None:
    check(storage, spark, full, runs, strategy)


PART_FOLDER = "raw/fullload/dbo/policy"


@st.composite
def dms_tasks(draw):
    """The files of one AWS DMS task (its S3 target settings drawn once), delivered across
    runs: a full load in the first (one file, or parts with hex counters), CDC files named
    by their time (nine or ten digits after the dash, flat or in date folders), some
    re-uploaded under another name with the same time, some re-delivered with new content."""
    header, timestamp, inserts_only = draw(st.booleans()), draw(st.booleans()), draw(st.booleans())
    op_in_full_load, dated = draw(st.booleans()), draw(st.booleans())
    count = draw(st.integers(1, 3))
    runs: list[list[Delivery]] = [[] for _ in range(count)]
    full_format = Format(header=header, operation=op_in_full_load, timestamp=timestamp)
    many = draw(st.booleans())  # enough rows for parts past LOAD00000009.csv
    lines, newline = draw(st.tuples(st.lists(full_load_line(), min_size=11 if many else 0, max_size=18 if many else 6),
                                    NEWLINES))
    parts = min(draw(st.sampled_from([1, 2, 11, 17])), len(lines)) if lines else 1
    if parts == 1 and draw(st.booleans()):  # DMS writes no file for an empty table: the header alone stands for it
        runs[0].append(Delivery(FULL, lines, newline, None, full_format if lines else Format(header=True)))
    else:  # LOAD00000001.csv ... LOAD00000009.csv, LOAD0000000A.csv ...: one snapshot, every part not empty
        cuts = sorted(draw(st.lists(st.integers(1, len(lines) - 1), min_size=parts - 1, max_size=parts - 1,
                                    unique=True))) if parts > 1 else []
        for counter, (start, stop) in enumerate(zip([0, *cuts], [*cuts, len(lines)]), start=1):
            runs[0].append(Delivery(f"{PART_FOLDER}/LOAD{counter:08X}.csv", lines[start:stop], newline, None,
                                    full_format if lines else Format(header=True), f"{PART_FOLDER}/LOAD*.csv"))
    cdc_format = Format(header=header, operation=not inserts_only, timestamp=timestamp)
    for index in range(draw(st.integers(1, 4))):
        digits = draw(st.sampled_from([9, 10])) if dated else 9
        clock = f"{9 + index:02d}{draw(st.sampled_from(['0000', '3000'])):s}"  # HHMMSS: files in time order
        fraction = draw(st.sampled_from(["0", "5"])) * (digits - 6)
        name = f"20240401-{clock}{fraction}"
        folder = "raw/cdcload/2024/04/01" if dated else "raw/cdcload"
        time = f"20240401{clock}{fraction}".ljust(23, "0")
        names = [f"{folder}/{name}.csv"] + ([f"{folder}/{name} copy.csv"] if draw(st.integers(0, 3)) == 0 else [])
        for key in names:  # a re-upload under another name has the same time: the keys' origins order them
            at = draw(st.integers(0, count - 1))
            lines, newline = draw(st.tuples(st.lists(cdc_line(inserts_only), max_size=5), NEWLINES))
            runs[at].append(Delivery(key, lines, newline, time, cdc_format))
            if at + 1 < count and draw(st.integers(0, 3)) == 0:
                lines, newline = draw(st.tuples(st.lists(cdc_line(inserts_only), max_size=5), NEWLINES))
                runs[draw(st.integers(at + 1, count - 1))].append(Delivery(key, lines, newline, time, cdc_format))
    return runs


@settings(SETTINGS, max_examples=12)
@given(runs=dms_tasks(), strategy=st.sampled_from(sorted(FORCING)))
def test_dms_shaped_tasks_match_the_model(storage: LakeStorage, spark: SparkSession, runs, strategy) -> None:
    check(storage, spark, None, runs, strategy)


def test_model_of_a_dms_task_by_hand() -> None:
    """The model on DMS's shapes: a snapshot's parts in counter order (not key order, not
    arrival), ties between re-uploads by their keys' origins, whatever the runs."""
    load = [(f"{PART_FOLDER}/LOAD{n:08X}.csv", [Line(f"{n},...", "upsert", 1, {"x": n})]) for n in (0x9, 0xA, 0x10)]
    model = Model()
    model.run([Delivery(name, lines, "\n", None, Format(), f"{PART_FOLDER}/LOAD*.csv") for name, lines in load])
    assert model.table() == {1: {"x": 0x10}}  # one snapshot: its parts follow each other by their counters
    assert [model.ledger[(name, 1)] for name, _ in load] == [(APPLIED, 1, 0, 1, 0), (APPLIED, 1, 0, 1, 0),
                                                              (APPLIED, 1, 1, 0, 0)]
    time = "20240401095000000000000"
    one, copy = ("raw/cdcload/2024/04/01/20240401-0950000000.csv", "raw/cdcload/2024/04/01/20240401-0950000000 copy.csv")
    first, second = sorted([one, copy], key=origin_of)
    for order in ([[one, copy]], [[one], [copy]], [[copy], [one]]):
        tied = Model()
        for names in order:
            tied.run([Delivery(name, [_upsert(2, 100 + (name == copy))], "\n", time) for name in names])
        assert tied.table()[2]["insured_value"] == 100 + (second == copy), order  # the later origin wins
    assert first != second


def test_model_on_a_hand_checked_example() -> None:
    """The model itself, on a hand-checked case (so a wrong model cannot pass silently)."""
    row = {"x": 1}
    full = [Line("1,...", "upsert", 1, row), Line("2,...", "upsert", 2, row), Line("3,...", "upsert", 3, row)]
    (n1, t1), (n2, t2), (n3, t3) = cdc_name(0), cdc_name(1), cdc_name(2)
    f1 = [Line("I,4", "upsert", 4, row), Line("U,4", "upsert", 4, {"x": 2})]
    f2 = [Line("U,2", "upsert", 2, {"x": 5}), Line("D,4", "delete", 4), Line("D,1", "delete", 1)]
    late = [Line("U,2", "upsert", 2, {"x": 9}), Line("I,1", "upsert", 1, {"x": 9}), Line("I,7", "upsert", 7, row)]
    f2_again = [Line("U,3", "upsert", 3, {"x": 6})]
    model = Model()
    model.run([Delivery(FULL, full, "\n", None), Delivery(n1, f1, "\n", t1)])
    model.run([Delivery(n3, f2, "\n", t3)])
    model.run([Delivery(n2, late, "\n", t2), Delivery(n3, f2_again, "\n", t3)])
    # 2: file 3's update beats the late file 2; 1: deleted by file 3, the late insert is older
    # (its tombstone); 4: deleted by file 3; 7: new; 3: the second delivery of file 3 updates it
    assert model.table() == {2: {"x": 5}, 3: {"x": 6}, 7: row}
    assert model.ledger == {
        (FULL, 1): (APPLIED, 3, 3, 0, 0), (n1, 1): (APPLIED, 2, 1, 1, 0), (n3, 1): (APPLIED, 3, 3, 0, 0),
        (n2, 1): (APPLIED, 3, 1, 2, 0), (n3, 2): (APPLIED, 1, 1, 0, 0),
    }
    assert model.tombs == {1: (t3, 0, origin_of(n3), 1, 3), 4: (t3, 0, origin_of(n3), 1, 2)}
    assert model.sequences()[3] == f"{t3}.000000.{origin_of(n3)}.0002.0000000001"

    second = [Line("2,...", "upsert", 2, {"x": 8}), Line("3,...", "upsert", 3, {"x": 8})]
    model.run([Delivery(FULL2, second, "\n", None)])  # as of its arrival: after file 3's second delivery
    assert model.table() == {2: {"x": 8}, 3: {"x": 8}} and model.tombs[7] == (t3, 900_000, NO_ORIGIN, 0, 0)
    model.run([Delivery(n2, [Line("I,9", "upsert", 9, row)], "\n", t2)])  # older than the snapshot
    assert model.table() == {2: {"x": 8}, 3: {"x": 8}} and model.ledger[(n2, 2)] == (APPLIED, 1, 0, 1, 0)
    model.run([Delivery(FULL, [Line("2,...", "upsert", 2, row)], "\n", None)])  # shrinks by half: allowed
    assert model.ledger[(FULL, 2)] == (APPLIED, 1, 1, 0, 0) and model.table() == {2: row}
    assert model.tombs[3] == (t3, 900_001, NO_ORIGIN, 0, 0)  # each later arrival follows the one before
    model.run([Delivery(FULL2, [Line("4,...", "upsert", 4, row)], "\n", None)])  # 1 -> 1 row: allowed
    model.run([Delivery(FULL2, [Line("5,...", "upsert", 5, row), Line("6,...", "upsert", 6, row),
                                Line("7,...", "upsert", 7, row)], "\n", None)])
    model.run([Delivery(FULL, [Line("5,...", "upsert", 5, row)], "\n", None)])  # 3 -> 1 rows: held
    assert model.ledger[(FULL, 3)] == (HELD, 1, 0, 0, 0) and set(model.table()) == {5, 6, 7}

    held = Model()
    held.run([Delivery(FULL, [Line("5,...", "upsert", 5, row), Line("6,x", "bad", reason="bad_date")], "\n", None)])
    assert held.table() == {} and held.ledger == {(FULL, 1): (HELD, 2, 0, 0, 1)}
    held.run([], approve=True)
    assert held.table() == {5: row} and held.ledger == {(FULL, 1): (APPLIED, 2, 1, 0, 1)}


# --- SCD2 cases, each checked against the model's history (and the model against hand-written rows) ---

def _upsert(key: int, value: int) -> Line:
    text = f"U,{key},2024-01-31,Urban,CA,West,{value},Retail,N,Y"
    return Line(text, "upsert", key, {"policy_id": key, "expiry_date": dt.date(2024, 1, 31), "location_name": "Urban",
                                      "state_code": "CA", "region_name": "West", "insured_value": value,
                                      "business_type": "Retail", "earthquake_coverage": "N", "flood_coverage": "Y"})


def _delete(key: int) -> Line:
    return Line(f"D,{key},,,,,,,,", "delete", key)


def _cdc(index: int, *lines: Line) -> Delivery:
    name, time = cdc_name(index)
    return Delivery(name, list(lines), "\n", time)


def _seq(index: int, row: int, delivery: int = 1) -> str:
    name, time = cdc_name(index)
    return text((time, 0, origin_of(name), delivery, row))


def _values(history: list[tuple]) -> list[tuple]:
    return [(k, frm, to, current, None if row is None else row["insured_value"]) for k, frm, to, current, row in history]


SCD2_CASES = {
    # several changes of one key in one file: each is a version, closed by the next
    "several changes in one file": [[_cdc(0, _upsert(1, 10), _upsert(1, 11), _upsert(1, 12), _upsert(2, 20))]],
    # a late file between two applied ones: its change is placed between theirs
    "a late file between two applied": [[_cdc(0, _upsert(1, 10))], [_cdc(2, _upsert(1, 30))],
                                        [_cdc(1, _upsert(1, 20), _upsert(2, 21))]],
    # a delete and a re-insert; a late change older than the delete is closed by it
    "a delete and a re-insert": [[_cdc(0, _upsert(1, 10)), _cdc(1, _delete(1))], [_cdc(3, _upsert(1, 30))],
                                 [_cdc(2, _upsert(1, 20))]],
    # inserted and deleted in one batch (a key the table never holds): a closed version
    "insert and delete in one batch": [[_cdc(0, _upsert(3, 10), _delete(3), _upsert(4, 40)),
                                        _cdc(1, _delete(4))]],
}
EXPECTED = {
    "several changes in one file": [(1, _seq(0, 1), _seq(0, 2), False, 10), (1, _seq(0, 2), _seq(0, 3), False, 11),
                                    (1, _seq(0, 3), None, True, 12), (2, _seq(0, 4), None, True, 20)],
    "a late file between two applied": [(1, _seq(0, 1), _seq(1, 1), False, 10), (1, _seq(1, 1), _seq(2, 1), False, 20),
                                        (1, _seq(2, 1), None, True, 30), (2, _seq(1, 2), None, True, 21)],
    "a delete and a re-insert": [(1, _seq(0, 1), _seq(1, 1), False, 10), (1, _seq(1, 1), _seq(1, 1), False, None),
                                 (1, _seq(2, 1), _seq(3, 1), False, 20), (1, _seq(3, 1), None, True, 30)],
    "insert and delete in one batch": [(3, _seq(0, 1), _seq(0, 2), False, 10), (3, _seq(0, 2), _seq(0, 2), False, None),
                                       (4, _seq(0, 3), _seq(1, 1), False, 40), (4, _seq(1, 1), _seq(1, 1), False, None)],
}


@pytest.mark.parametrize("case", sorted(SCD2_CASES))
def test_scd2_case_matches_the_model(storage: LakeStorage, spark: SparkSession, case: str) -> None:
    model = Model()
    for run in SCD2_CASES[case]:
        model.run(run)
    assert _values(model.history()) == EXPECTED[case]  # the model, by hand
    check(storage, spark, None, SCD2_CASES[case], merge.Strategy.NARROW)  # the pipeline, against the model


def test_model_history_of_a_snapshot_and_a_late_change() -> None:
    """A snapshot closes the versions of the keys it lacks at its stamp; a late change older
    than it is kept for a key the lake knows (placed where it belongs), and not for a key
    never seen (the floor supersedes it, as for the table)."""
    model = Model()
    full = [Line("1,...", "upsert", 1, {"x": 1})]
    model.run([Delivery(FULL, full, "\n", None), _cdc(0, _upsert(2, 20))])  # the snapshot precedes the change
    model.run([Delivery(FULL2, [Line("1,...", "upsert", 1, {"x": 2})], "\n", None)])  # deletes 2 as of its arrival
    floor = (cdc_name(0)[1], 900_000, NO_ORIGIN, 0, 0)
    old, old_name = "20231231090000000000000", "raw/cdcload/20231231-090000000.csv"
    model.run([Delivery(old_name, [_upsert(9, 90), _upsert(2, 21)], "\n", old)])
    assert [(k, frm, to, current) for k, frm, to, current, _ in model.history()] == [
        (1, text((ARRIVAL[0], ARRIVAL[1], origin_of(FULL), 1, 2)), text((floor[0], floor[1], origin_of(FULL2), 1, 2)),
         False),
        (1, text((floor[0], floor[1], origin_of(FULL2), 1, 2)), None, True),
        (2, text((old, 0, origin_of(old_name), 1, 2)), _seq(0, 1), False), (2, _seq(0, 1), text(floor), False),
        (2, text(floor), text(floor), False),
    ]
    assert model.table() == {1: {"x": 2}}
