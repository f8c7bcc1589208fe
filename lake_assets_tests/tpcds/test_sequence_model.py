"""Property test: tpcds.web_sales agrees with a small pure-Python model of the sequenced-change rule.

Random interleavings of day objects put (first and re-delivered; one that would empty its
day or shrink it by more than half is held by the snapshot guard, and a backfill audits it
again), sensor loads of what is pending, backfills of every day, and corrections (DMS-named at a few source times, early or
late, or named without a time and so sequenced by arrival) are run through the real loaders
against `helpers/tpcds_model.Model`, whose sequences are computed here from the rules
(tpcds/sequencing.py's docstring): a recorded (key, ETag) keeps its sequence; a DMS name
gives (its time, part 0, delivery); anything else arrives just after the newest sequence
applied, one part apart in a run. Checked after every step: the table's rows and every
ledger entry's applied/superseded counts.
"""

import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lake_assets.core.ledger import Ledger
from lake_assets.core.sequence import ARRIVAL_PART, FileStamp
from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.corrections import apply_corrections
from lake_assets.tpcds.load import load_fact_days, pending_fact_days
from lake_assets.tpcds.schema import RAW, TpcdsTable, date_sk, ledger_name, sk_date
from lake_assets_tests.conftest import make_storage
from lake_assets_tests.helpers.iceberg import drop_namespace_tables
from lake_assets_tests.helpers.tpcds import fact_key
from lake_assets_tests.helpers.tpcds_model import ITEM, ORDER, SOLD, Change, Model, key_of
from lake_assets_tests.tpcds.test_load import fact_rows

WEB_SALES = ledger_name(TpcdsTable.WEB_SALES)
DAYS = [date_sk(sk_date(2451000)), date_sk(sk_date(2451001))]
KEYS = [(item, order) for item in (1, 2) for order in (1, 2, 3)]
QUANTITY, MARKER = 18, 12
MAX_SHRINK = 0.5  # a day object keeping less than this share of its day's rows is held (LAKE_FULLLOAD_MAX_SHRINK)
SETTINGS = settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def line(key: tuple[int, int], day: int, quantity: int) -> list[str]:
    fields = [""] * 34
    fields[SOLD], fields[ITEM], fields[ORDER], fields[QUANTITY] = str(day), str(key[0]), str(key[1]), str(quantity)
    return fields


DAY_PUT = st.tuples(st.just("day"), st.sampled_from(DAYS),
                    st.lists(st.tuples(st.sampled_from(KEYS), st.integers(1, 9)), max_size=4))
CORRECTION = st.tuples(st.just("cdc"), st.sampled_from(["20240101-000000000", "20240102-000000000", "fix"]),
                       st.lists(st.tuples(st.sampled_from("IUD"), st.sampled_from(KEYS), st.sampled_from(DAYS),
                                          st.integers(1, 9)), min_size=1, max_size=3))
STEPS = st.lists(st.one_of(DAY_PUT, CORRECTION, st.just(("load",)), st.just(("backfill",))), min_size=3, max_size=7)


class Lake:
    """The model's side: object sequences by the rules, and the model table."""

    def __init__(self) -> None:
        self.model = Model()
        self.recorded: dict[tuple[str, str], str] = {}  # (key, content) -> base sequence
        self.contents: dict[str, list[str]] = {}  # object key -> contents seen
        self.newest: str | None = None
        self.counts: dict[str, tuple[int, int]] = {}  # object key -> (applied, superseded) of its last load
        self.published: set[tuple[str, str]] = set()  # (key, content) applied once: not audited again

    def base(self, key: str, content: str, named: str | None) -> str:
        if (key, content) in self.recorded:
            return self.recorded[(key, content)]
        seen = self.contents.setdefault(key, [])
        delivery = len([c for c in seen if c != content]) + 1
        if named is not None:
            base = FileStamp(named.replace("-", "")).base(delivery)
        elif self.newest is None:
            base = FileStamp("0" * 17, ARRIVAL_PART).base(delivery)
        else:
            before = FileStamp.parse(self.newest)
            base = FileStamp(before.time, max(ARRIVAL_PART, before.part + 1)).base(delivery)
        return base

    def held(self, key: str, content: str, rows: list[list[str]], day: int, base: str) -> bool:
        """The snapshot guard of day objects (core/snapshot_guard.py, tpcds/load.py `day_guard`):
        content never published, for a day that holds rows, that is empty or keeps less than
        half of the day's rows (its rows, and the day's rows newer than it, which it keeps)."""
        if (key, content) in self.published:
            return False
        day_rows = [sequence for fields, sequence in self.model.rows.values() if fields[SOLD] == str(day)]
        newer = sum(1 for sequence in day_rows if sequence >= base)
        return bool(day_rows) and (not rows or len(rows) + newer < MAX_SHRINK * len(day_rows))

    def load(self, objects: list[tuple[str, str, list[list[str]], str | None, int | None, bool]]) -> set[str]:
        """One run: (object key, content, rows as fields, DMS time or None, day or None, delete
        flags); returns the keys of the day objects held for `lake approve`."""
        changes, floors, bases, held = [], {}, {}, set()
        for key, content, rows, named, day, deletes in objects:
            base = self.base(key, content, named)
            if named is None and (key, content) not in self.recorded:
                self.newest = base
            bases[key] = (content, base)
            if day is not None and self.held(key, content, rows, day, base):
                held.add(key)
                continue
            for number, (fields, delete) in enumerate(zip(rows, deletes), start=1):
                changes.append(Change(key, base[:-10] + f"{number:010d}", fields, delete))
            if day is not None:
                floors[key] = (str(day), base)
        applied = self.model.run(changes, floors)
        for key, (content, base) in bases.items():
            self.recorded[(key, content)] = base
            if content not in self.contents[key]:
                self.contents[key].append(content)
            self.newest = max(self.newest or "", base)
            rows = sum(1 for c in changes if c.obj == key)
            self.counts[key] = (applied.get(key, 0), rows - applied.get(key, 0))
            if key not in held:
                self.published.add((key, content))
        return held


@SETTINGS
@given(steps=STEPS)
def test_day_loads_backfills_and_corrections_match_the_model(storage: LakeStorage, spark: SparkSession,
                                                             steps) -> None:
    bucket = make_storage(storage.endpoint_url, Path(storage.home), f"m-{uuid.uuid4().hex[:12]}")
    catalog: LakeCatalog = bucket.catalog()
    drop_namespace_tables(catalog, "tpcds")
    try:
        run_steps(bucket, spark, catalog, steps)
    finally:
        bucket.delete_prefix("")
        bucket.get_client().delete_bucket(Bucket=bucket.bucket)


def run_steps(bucket: LakeStorage, spark: SparkSession, catalog: LakeCatalog, steps: list[tuple]) -> None:
    lake = Lake()
    raw: dict[str, tuple[str, list[list[str]], int]] = {}  # day object key -> (content, rows, day)
    for number, step in enumerate(steps):
        if step[0] == "day":
            _, day, picks = step
            rows = [line(key, day, quantity) for key, quantity in dict(picks).items()]
            for fields in rows:
                fields[MARKER] = str(number)  # every put of rows is new content (an empty one is not)
            content = "".join("|".join(r) + "\n" for r in rows)
            bucket.put_bytes(fact_key(sk_date(day)), content.encode())
            raw[fact_key(sk_date(day))] = (content, rows, day)
            continue
        if step[0] == "cdc":
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
            apply_corrections(bucket, spark, f"run-{number}")
            lake.load([(key, content, rows, None if named == "fix" else named, None, deletes)])
        else:
            pending = pending_fact_days(bucket, Ledger(bucket))
            days = pending if step[0] == "load" else [sk_date(d) for d in DAYS]
            load_fact_days(bucket, spark, days, f"run-{number}")
            chosen = sorted((raw[fact_key(d)][2], fact_key(d)) for d in days if fact_key(d) in raw)
            lake.load([(key, raw[key][0], raw[key][1], None, day, [False] * len(raw[key][1]))
                       for day, key in chosen])
        table = {key_of(["" if v is None else str(v) for v in r]) for r in fact_rows(catalog)}
        assert table == set(lake.model.rows), step
        quantities = {key_of(["" if v is None else str(v) for v in r]): str(r[QUANTITY]) for r in fact_rows(catalog)}
        assert quantities == {k: f[QUANTITY] for k, (f, _) in lake.model.rows.items()}, step
        latest = {e["source_file"]: e for e in Ledger(bucket).entries(WEB_SALES).to_pylist()}
        assert {k: (e["rows_applied"], e["rows_superseded"]) for k, e in latest.items()} == lake.counts, step
