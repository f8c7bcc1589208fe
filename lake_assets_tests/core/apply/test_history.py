"""The SCD2 history's intervals (core/apply/history.py), computed on the engine, against a small
pure-Python model: for any changes, in any order, each key's versions in sequence order, each
valid until the key's next change, a delete valid at no point, and the newest live version
current; and `record` of a batch into a stored history (late changes included, a change
recorded again replaced, not doubled) gives the model's history of all the changes.
"""

import datetime as dt
import random
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lake_assets.core.apply import history
from lake_assets.resources.storage import LakeStorage

KEY = "policy_id"
COLUMNS = [KEY, "_operation", "_sequence"]
SCHEMA = f"{KEY} INT, _operation STRING, _sequence STRING, commit_version BIGINT"
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
changes_strategy = st.lists(st.tuples(st.integers(0, 6), st.sampled_from("IUD"), st.integers(1, 28)),
                            max_size=30, unique_by=lambda c: (c[0], c[2]))


def sequence(day: int, row: int) -> str:
    """A sequence of a file dated 2024-01-`day` (the core's fixed-width form)."""
    return f"202401{day:02d}000000000.000000.0001.{row:010d}"


def start(text: str) -> dt.datetime:
    return dt.datetime.strptime(text[:14], "%Y%m%d%H%M%S")


def model(changes: list[dict]) -> list[dict]:
    """Each change with its validity, in key and sequence order."""
    rows = sorted(changes, key=lambda c: (c[KEY], c["_sequence"]))
    out = []
    for i, row in enumerate(rows):
        following = rows[i + 1] if i + 1 < len(rows) and rows[i + 1][KEY] == row[KEY] else None
        deleted = row["_operation"] == "D"
        end = row["_sequence"] if deleted else following["_sequence"] if following else None
        out.append({**{c: row[c] for c in COLUMNS}, history.VALID_TO_SEQUENCE: end,
                    history.VALID_FROM: start(row["_sequence"]), history.VALID_TO: start(end) if end else None,
                    history.IS_CURRENT: following is None and not deleted})
    return out


def rows_of(changes: list[tuple[int, str, int]], first_row: int, version: int) -> list[dict]:
    return [{KEY: k, "_operation": op, "_sequence": sequence(day, first_row + n), "commit_version": version}
            for n, (k, op, day) in enumerate(changes)]


def result(rows) -> list[dict]:
    names = [*COLUMNS, history.VALID_TO_SEQUENCE, history.VALID_FROM, history.VALID_TO, history.IS_CURRENT]
    found = [{n: r[n] for n in names} for r in rows]
    return sorted(found, key=lambda r: (r[KEY], r["_sequence"]))


@SETTINGS
@given(changes=changes_strategy, seed=st.integers(0, 2**32 - 1))
def test_the_intervals_of_changes_in_any_order_are_the_models(spark: SparkSession, changes, seed: int) -> None:
    rows = rows_of(changes, 0, 1)
    random.Random(seed).shuffle(rows)
    frame = spark.createDataFrame([tuple(r.values()) for r in rows], SCHEMA)
    assert result(history.versions(frame, [KEY], COLUMNS).collect()) == model(rows)


@SETTINGS
@given(stored=changes_strategy, batch=changes_strategy, again=st.integers(0, 30))
def test_a_batch_recorded_into_a_stored_history_gives_the_models_history(
        storage: LakeStorage, spark: SparkSession, stored, batch, again: int) -> None:
    """The stored changes, then a batch (late changes among them, and some of the stored changes
    recorded again: a rerun), give the history of all the changes, each once."""
    uri = storage.uri(f"history-{uuid.uuid4().hex}")  # each example its own table
    first = rows_of(stored, 0, 1)
    repeated = first[:again]
    second = rows_of(batch, 1_000, 2) + [{**r, "commit_version": 2} for r in repeated]
    for rows, version in ((first, 1), (second, 2)):
        frame = spark.createDataFrame([tuple(r.values()) for r in rows], SCHEMA).drop("commit_version")
        history.record(spark, uri, open_table_at(storage, uri), frame, [KEY], COLUMNS, True, version, "int")
    written = spark.read.format("delta").load(uri).collect() if (first or second) else []
    assert result(written) == model(first + rows_of(batch, 1_000, 2))


def closed(rows: list[dict], candidates: list[dict]) -> list[dict]:
    """`rows` and, in sequence order, each candidate delete that ends a live version: no row at its
    sequence, and the key's row just before it (a candidate taken counts) is not a delete."""
    recorded = {(r[KEY], r["_sequence"]): r for r in rows}
    for candidate in sorted(candidates, key=lambda c: (c[KEY], c["_sequence"])):
        at = (candidate[KEY], candidate["_sequence"])
        before = [s for k, s in recorded if k == candidate[KEY] and s < candidate["_sequence"]]
        if at not in recorded and before and recorded[(candidate[KEY], max(before))]["_operation"] != "D":
            recorded[at] = candidate
    return list(recorded.values())


@SETTINGS
@given(stored=changes_strategy, batch=changes_strategy,
       closing=st.lists(st.tuples(st.integers(0, 6), st.integers(1, 28)), max_size=10), on_rows=st.integers(0, 4))
def test_closing_deletes_are_recorded_only_where_they_end_a_live_version(
        storage: LakeStorage, spark: SparkSession, stored, batch, closing, on_rows: int) -> None:
    """A batch's candidate deletes (a snapshot's, a tombstone's closing a late change), some at the
    sequence of a stored row: each recorded only where it ends a live version of the stored and new
    rows, the first of several in a row only; the rest of the history as `record` of the batch."""
    uri = storage.uri(f"history-{uuid.uuid4().hex}")
    first = rows_of(stored, 0, 1)
    second = rows_of(batch, 1_000, 2)
    candidates = [{KEY: k, "_operation": "D", "_sequence": sequence(day, 5_000 + n), "commit_version": 2}
                  for n, (k, day) in enumerate(closing)]
    candidates += [{**r, "_operation": "D", "commit_version": 2} for r in first[:on_rows]]

    def frame(rows: list[dict]):
        return spark.createDataFrame([tuple(r.values()) for r in rows], SCHEMA).drop("commit_version")

    history.record(spark, uri, open_table_at(storage, uri), frame(first), [KEY], COLUMNS, True, 1, "int")
    history.record(spark, uri, open_table_at(storage, uri), frame(second), [KEY], COLUMNS, True, 2, "int",
                   closing=frame(candidates))
    written = spark.read.format("delta").load(uri).collect() if (first or second) else []
    assert result(written) == model(closed(first + second, candidates))


def open_table_at(storage: LakeStorage, uri: str):
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(uri, storage_options=storage.delta_storage_options())
    except TableNotFoundError:
        return None


