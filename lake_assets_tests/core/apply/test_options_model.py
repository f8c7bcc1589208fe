"""Property test: a declared table's AUTO CDC options against a small pure-Python model of them.

A table keyed on `k`, sequenced by a column (`SEQUENCE BY seq`), its operation in a column
(`APPLY AS DELETE WHEN op = 'DELETE'`, `APPLY AS TRUNCATE WHEN op = 'TRUNCATE'`, both left out
of the table: `COLUMNS * EXCEPT (op, seq)`), with `ignore_null_updates`, `track_history_except`
and `partition_by: [a]` (a key's update may move it to another partition, or to NULL's) drawn
per example. Random changes (upserts with NULLs, deletes, truncates) arrive in random order,
grouped into one to three runs. The model applies each run as the lake documents it: per key the
newest change wins if it is at least as new as the key's row and tombstone; a truncate deletes
every key whose newest change is not newer; an update's NULLs keep the values before it (in
sequence order, within the run and from the table's row, never across a delete or a truncate);
the history holds every change, and each truncate's delete of each key it covers that was live just
before it (the run knows the key: a row, a tombstone, a change; whether the truncate deletes it or a
newer change keeps it), and a delete at the tombstone of a key without a row closing a late change
older than it (unless the key was not live there): each change its own version, or, with
`track_history_except`, a version per change of a tracked column. The table and its history must equal the model's
(the history but in the case docs/tables.md documents: a tracked version that absorbed later
changes is not split by an older delete or truncate of a later run). The table is Delta or
Iceberg: one core, read back by delta-rs or pyiceberg.
"""

import uuid

import pytest
from dataclasses import dataclass, field

from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lake_assets.core.apply.run import apply_pending
from lake_assets.core.registry import parse
from lake_assets.core.formats import iceberg
from lake_assets.core.tables import LakeTable, table_set
from lake_assets.resources.storage import LakeStorage

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
HEADER = "k,a,b,operation,seq"


@dataclass(frozen=True)
class Change:
    key: int | None
    op: str  # U, D or T
    a: str | None
    b: int | None
    seq: int


@st.composite
def changes(draw) -> list[Change]:
    count = draw(st.integers(1, 12))
    sequences = draw(st.permutations(range(1, count + 1)))
    out = []
    for seq in sequences:
        op = draw(st.sampled_from("UUUUDT"))
        key = None if op == "T" else draw(st.integers(1, 4))
        a = None if op == "T" else draw(st.sampled_from([None, "x", "y"]))
        b = None if op == "T" else draw(st.sampled_from([None, 1, 2]))
        out.append(Change(key, op, a, b, seq))
    return out


@dataclass
class Model:
    ignore_nulls: bool
    tracked: tuple[str, ...] | None  # the columns a new version follows; None: every change is a version
    table: dict[int, Change] = field(default_factory=dict)
    tombs: dict[int, int] = field(default_factory=dict)
    recorded: dict[tuple[int, int], Change] = field(default_factory=dict)

    def run(self, batch: list[Change]) -> None:
        truncates = sorted(c.seq for c in batch if c.op == "T")
        truncate = max(truncates) if truncates else None
        events = sorted((c for c in batch if c.op != "T"), key=lambda c: c.seq)
        if self.ignore_nulls:
            events = self._filled(events, truncates)
        existing = {k: max([*([self.table[k].seq] if k in self.table else []), *([self.tombs[k]] if k in self.tombs
                                                                                 else [])]) for k in {*self.table,
                                                                                                      *self.tombs}}
        newest_change = {c.key: c for c in events}  # in sequence order: the last of a key is its newest
        winners = {k: c for k, c in newest_change.items() if existing.get(k) is None or c.seq >= existing[k]}
        doomed, closing = set(), set()
        if truncate is not None:
            for key in {*existing, *winners}:
                # the history's delete at every truncate of the run, if the key was live just before
                closing |= {(key, seq) for seq in truncates}
                newest = max([*([existing[key]] if key in existing else []), *([winners[key].seq] if key in winners
                                                                              else [])])
                if newest <= truncate:
                    doomed.add(key)
        # a late change of a key the table does not hold, older than its tombstone: closed there
        closing |= {(c.key, self.tombs[c.key]) for c in events
                    if c.key not in self.table and c.key in self.tombs and c.seq < self.tombs[c.key]}
        for key, change in winners.items():
            if key in doomed and change.seq < truncate:
                continue
            if change.op == "D":
                self.table.pop(key, None)
                self.tombs[key] = change.seq
            else:
                self.table[key] = change
        for key in doomed:
            self.table.pop(key, None)
            self.tombs[key] = truncate
        for change in events:
            self.recorded[(change.key, change.seq)] = change
        for key, seq in sorted(closing):  # in sequence order: a delete right after another closes nothing
            before = [s for k, s in self.recorded if k == key and s < seq]
            if (key, seq) not in self.recorded and before and self.recorded[(key, max(before))].op != "D":
                self.recorded[(key, seq)] = Change(key, "D", None, None, seq)

    def _filled(self, events: list[Change], truncates: list[int]) -> list[Change]:
        out = []
        for key in {c.key for c in events}:
            rows = [("base", self.table[key])] if key in self.table else []
            rows += [("change", c) for c in events if c.key == key]
            rows.sort(key=lambda r: r[1].seq)
            last: dict[str, dict] = {}
            deletes = 0
            for kind, change in rows:
                deletes += change.op == "D"
                segment = (deletes, sum(change.seq > t for t in truncates))
                values = last.setdefault(segment, {})
                if change.op == "U":
                    a = change.a if change.a is not None else values.get("a")
                    b = change.b if change.b is not None else values.get("b")
                    change = Change(change.key, change.op, a, b, change.seq)
                for name in ("a", "b"):
                    if getattr(change, name) is not None:
                        values[name] = getattr(change, name)
                if kind == "change":
                    out.append(change)
        return sorted(out, key=lambda c: c.seq)

    def history(self) -> list[tuple]:
        """(k, op, a, b, start, end) of every version and delete, in key and start order."""
        out = []
        for key in sorted({k for k, _ in self.recorded}):
            changes = sorted((c for (k, _), c in self.recorded.items() if k == key), key=lambda c: c.seq)
            groups: list[list[Change]] = []
            for change in changes:
                previous = groups[-1][-1] if groups else None
                same = self.tracked is not None and previous is not None and previous.op != "D" and \
                    change.op != "D" and all(getattr(previous, c) == getattr(change, c) for c in self.tracked)
                if same:
                    groups[-1].append(change)
                else:
                    groups.append([change])
            for index, group in enumerate(groups):
                last, start = group[-1], group[0].seq
                following = groups[index + 1][0].seq if index + 1 < len(groups) else None
                end = start if last.op == "D" else following
                out.append((key, last.op, last.a, last.b, start, end))
        return out


def declared(ignore_nulls: bool, track_except: bool, partitioned: bool, table_format: str = "delta"):
    name = f"opts_{uuid.uuid4().hex[:8]}"
    options = f"format: {table_format}\n" + ("ignore_null_updates: true\n" if ignore_nulls else "") + \
        ("track_history_except: [b]\n" if track_except else "") + ("partition_by: [a]\n" if partitioned else "")
    return parse(f"""
name: {name}
group: options
keys: [k]
columns:
  - {{name: k, type: INT, nullable: false}}
  - {{name: a, type: STRING}}
  - {{name: b, type: INT}}
  - {{name: operation, type: STRING}}
  - {{name: seq, type: BIGINT}}
sequence_by: seq
except_columns: [operation, seq]
sources:
  - {{prefix: raw/{name}/, kind: cdc, operation_column: operation, delete: DELETE, truncate: TRUNCATE}}
{options}""", "model")


def _line(change: Change) -> str:
    op = {"U": "UPDATE", "D": "DELETE", "T": "TRUNCATE"}[change.op]
    values = ["" if v is None else str(v) for v in (change.key, change.a, change.b)]
    return ",".join([*values, op, str(change.seq)])


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
@SETTINGS
@given(drawn=changes(), cuts=st.lists(st.integers(0, 12), max_size=2), ignore_nulls=st.booleans(),
       track_except=st.booleans(), partitioned=st.booleans())
def test_the_options_match_the_model(storage: LakeStorage, spark: SparkSession, drawn: list[Change],
                                     cuts: list[int], ignore_nulls: bool, track_except: bool,
                                     partitioned: bool, table_format: str) -> None:
    table = declared(ignore_nulls, track_except, partitioned, table_format)
    model = Model(ignore_nulls, ("a",) if track_except else None)
    bounds = sorted({0, len(drawn), *(min(c, len(drawn)) for c in cuts)})
    newest_seen, late_split = 0, False
    for number, (start, end) in enumerate(zip(bounds, bounds[1:])):
        batch = drawn[start:end]
        # docs/tables.md: a tracked version that absorbed later changes is not split again by a delete
        # or truncate older than them arriving in a later run (the history then differs from the model)
        late_split |= track_except and any(c.op in "DT" and c.seq < newest_seen for c in batch)
        newest_seen = max([newest_seen, *(c.seq for c in batch if c.op == "U")])
        storage.put_bytes(f"{table.sources[0].prefix}run-{number}.csv",
                          "\n".join([HEADER, *map(_line, batch), ""]).encode())
        apply_pending(table, storage, spark, f"run-{number}")
        model.run(batch)
    tables = table_set(table)
    options = storage.delta_storage_options()
    rows = _iceberg_rows(storage, tables.table) if table_format == "iceberg" else \
        _rows(tables.table.uri(storage), options)
    assert {r["k"]: (r["a"], r["b"]) for r in rows} == {k: (c.a, c.b) for k, c in model.table.items()}
    if model.recorded and not late_split:
        written = _rows(tables.history.uri(storage), options)
        history = sorted(((r["k"], r["_operation"] if r["_operation"] == "D" else "U", r["a"], r["b"],
                           int(r["_sequence"].split(".")[0]),
                           None if r["valid_to_sequence"] is None else int(r["valid_to_sequence"].split(".")[0]))
                          for r in written), key=lambda r: (r[0], r[4]))
        assert history == model.history()


def _iceberg_rows(storage: LakeStorage, table: LakeTable) -> list[dict]:
    """The table's rows read by pyiceberg (a second reader: the lake writes with Sail)."""
    found = iceberg.open_table(storage, table)
    return found.scan().to_arrow().to_pylist() if found is not None and found.current_snapshot() else []


def _rows(uri: str, options: dict) -> list[dict]:
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(uri, storage_options=options).to_pyarrow_table().to_pylist()
    except TableNotFoundError:
        return []
