"""Property test: the pipeline agrees with a tiny pure-Python model of the CDC semantics.

The model: a full load replaces the table's contents; I and U upsert, D deletes; files
apply in key order and rows in file order (so within one run the last row for a key wins
and the earlier ones are superseded); invalid rows are quarantined; a CDC file whose key
sorts at or before an already-applied CDC file is quarantined whole as `late_file`.
"""

import datetime as dt
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lake_assets.core.formats.delta import open_table, to_arrow
from lake_assets.insurance.contract import DATA_COLUMN_NAMES, Reason
from lake_assets.insurance.pipeline import apply_pending
from lake_assets.core.ledger import APPLIED, REJECTED, Ledger
from lake_assets.resources.storage import LakeStorage
from lake_assets.core.tables import INSURANCE, INSURANCE_QUARANTINE
from lake_assets_tests.conftest import make_storage

HEADER = ",".join(DATA_COLUMN_NAMES)
FULL = "raw/fullload/full-load.csv"
LATE = "raw/cdcload/000-late.csv"  # sorts before every regular CDC file below
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
def cdc_line(draw) -> Line:
    key = draw(KEYS)
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


def render(lines: list[Line], newline: str, header: bool = False) -> bytes:
    texts = ([HEADER] if header else []) + [line.text for line in lines]
    return "".join(t + newline for t in texts).encode()


def line_numbers(lines: list[Line], header: bool) -> list[int]:
    """The physical line on which each record starts (quoted values may span lines)."""
    numbers, at = [], 2 if header else 1
    for line in lines:
        numbers.append(at)
        at += 1 + line.text.count("\n")
    return numbers


# --- the model -------------------------------------------------------------------------

def model(full: list[Line] | None, runs: list[list[tuple[str, list[Line]]]]):
    """(table by key, ledger counts by file, quarantined (file, line, reason) multiset)."""
    state: dict[int, dict] = {}
    ledger: dict[str, tuple] = {}
    parked: Counter = Counter()
    latest_applied: str | None = None

    def account(name: str, lines: list[Line], superseded: int, late: bool = False, header: bool = False) -> str:
        valid = 0 if late else sum(line.kind != "bad" for line in lines)
        quarantined = len(lines) - valid
        status = REJECTED if late or (valid == 0 and quarantined) else APPLIED  # late: even when empty
        ledger[name] = (status, len(lines), valid - superseded, superseded, quarantined)
        for line, number in zip(lines, line_numbers(lines, header)):
            if late or line.kind == "bad":
                parked[(name, number, Reason.LATE_FILE.value if late else line.reason)] += 1
        return status

    for index, files in enumerate(runs):
        if index == 0 and full is not None:
            valid = [line for line in full if line.kind != "bad"]
            winners = {line.key: line.row for line in valid}  # the last row per key
            if account(FULL, full, len(valid) - len(winners), header=True) == APPLIED:
                state = winners  # a full load replaces the table's contents
        on_time = []
        for name, lines in sorted(files):
            if latest_applied is not None and name <= latest_applied:
                account(name, lines, 0, late=True)
            else:
                on_time.append((name, lines))
        changes = [(name, line) for name, lines in on_time for line in lines if line.kind != "bad"]
        last = {line.key: position for position, (_, line) in enumerate(changes)}
        for position, (name, line) in enumerate(changes):  # files in key order, rows in file order
            if line.kind == "delete":
                state.pop(line.key, None)
            else:
                state[line.key] = line.row
        for name, lines in on_time:
            kept = sum(1 for position, (n, line) in enumerate(changes) if n == name and last[line.key] == position)
            valid = sum(line.kind != "bad" for line in lines)
            if account(name, lines, valid - kept) == APPLIED:
                latest_applied = max(latest_applied or name, name)
    return state, ledger, parked


# --- running it through the pipeline ---------------------------------------------------

def check(base: LakeStorage, spark: SparkSession, full, files, boundaries: list[int], late) -> None:
    """Run one example in a bucket of its own, dropped afterwards: SeaweedFS gives every
    bucket its own volumes, and a server runs out of them after some dozens of buckets."""
    storage = make_storage(base.endpoint_url, Path(base.home), f"h-{uuid.uuid4().hex[:12]}")
    try:
        _check(storage, spark, full, files, boundaries, late)
    finally:
        drop_bucket(storage)


def drop_bucket(storage: LakeStorage) -> None:
    try:
        storage.delete_prefix("")
        storage.get_client().delete_bucket(Bucket=storage.bucket)
    except Exception:  # noqa: BLE001 - best effort: a leftover bucket only costs disk
        pass


def _check(storage: LakeStorage, spark: SparkSession, full, files, boundaries: list[int], late) -> None:
    named = [(f"raw/cdcload/{i + 1:03d}.csv", lines, newline) for i, (lines, newline) in enumerate(files)]
    runs = [named[start:stop] for start, stop in zip([0, *boundaries], [*boundaries, len(named)])]
    if late is not None:
        runs[-1] = [*runs[-1], (LATE, *late)]

    for index, run in enumerate(runs):
        if index == 0 and full is not None:
            storage.put_bytes(FULL, render(full[0], full[1], header=True))
        for name, lines, newline in reversed(run):  # uploaded out of key order on purpose
            storage.put_bytes(name, render(lines, newline))
        apply_pending(storage, spark, f"run-{index}")

    expected, counts, parked = model(full and full[0], [[(n, lines) for n, lines, _ in run] for run in runs])

    delta = open_table(storage, INSURANCE)
    rows = to_arrow(delta).select(DATA_COLUMN_NAMES).to_pylist() if delta else []
    assert len({r["policy_id"] for r in rows}) == len(rows), "duplicate keys in the table"
    assert {r["policy_id"]: r for r in rows} == expected

    entries = Ledger(storage).entries("insurance").to_pylist()
    assert len(entries) == len({e["source_file"] for e in entries}), "a file was recorded twice"
    actual = {e["source_file"]: (e["status"], e["rows_in_file"], e["rows_applied"], e["rows_superseded"],
                                 e["rows_quarantined"]) for e in entries}
    assert actual == counts
    for status, in_file, applied, superseded, quarantined in actual.values():
        assert in_file == applied + superseded + quarantined

    quarantine = open_table(storage, INSURANCE_QUARANTINE)
    found = Counter()
    if quarantine is not None:
        for q in to_arrow(quarantine).to_pylist():
            found[(q["source_file"], q["line_number"], q["reason"])] += 1
    assert found == parked


@SETTINGS
@given(full=FULL_LOAD, files=st.lists(FILE, min_size=1, max_size=4))
def test_one_run_matches_the_model(storage: LakeStorage, spark: SparkSession, full, files) -> None:
    check(storage, spark, full, files, [], None)


@st.composite
def split(draw):
    files = draw(st.lists(FILE, min_size=2, max_size=4))
    cuts = draw(st.lists(st.integers(1, len(files) - 1), min_size=1, max_size=len(files) - 1, unique=True))
    late = draw(st.none() | FILE)
    return files, sorted(cuts), late


@SETTINGS
@given(full=FULL_LOAD, plan=split())
def test_several_runs_match_the_model(storage: LakeStorage, spark: SparkSession, full, plan) -> None:
    files, cuts, late = plan
    check(storage, spark, full, files, cuts, late)


def test_model_on_the_seed_example() -> None:
    """The model itself, on a hand-checked case (so a wrong model cannot pass silently)."""
    row = {"x": 1}
    full = [Line("1,...", "upsert", 1, row), Line("2,...", "upsert", 2, row), Line("bad", "bad", reason="bad_date")]
    f1 = [Line("I,3", "upsert", 3, row), Line("D,1", "delete", 1), Line("U,3", "upsert", 3, {"x": 2})]
    f2 = [Line("D,3", "delete", 3), Line("I,4", "upsert", 4, row)]
    late = [Line("U,2", "upsert", 2, {"x": 9})]
    state, ledger, parked = model(full, [[("raw/cdcload/001.csv", f1)], [("raw/cdcload/002.csv", f2), (LATE, late)]])
    assert state == {2: row, 4: row}
    assert ledger == {
        FULL: (APPLIED, 3, 2, 0, 1), "raw/cdcload/001.csv": (APPLIED, 3, 2, 1, 0),
        "raw/cdcload/002.csv": (APPLIED, 2, 2, 0, 0), LATE: (REJECTED, 1, 0, 0, 1),
    }
    assert parked == Counter({(FULL, 4, "bad_date"): 1, (LATE, 1, "late_file"): 1})
