"""The SCD2 history's intervals (core/scd2.py `intervals`) against a small pure-Python model:
for any rows, given in any order, each key's versions in sequence order, each valid until
the key's next change, a delete valid at no point, and the newest live version current.

`record` hands `versions` a key's stored versions (in sequence order, with their validity)
followed by the batch's changes, and one stable sort of the keys keeps them in order; a
late change, or a key's stored rows read from two files in the wrong order, must still
come out in sequence order, and the keys the batch does not change keep their validity.
"""

import datetime as dt

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lake_assets.core import scd2

KEY = "policy_id"
SCHEMA = pa.schema([(KEY, pa.int64()), ("_operation", pa.string()), (scd2.SEQUENCE, pa.string()),
                    (scd2.COMMIT_VERSION, pa.int64())])


def sequence(day: int, row: int) -> str:
    """A sequence of a file dated 2024-01-`day` (insurance's fixed-width form)."""
    return f"202401{day:02d}000000000.000000.0001.{row:010d}"


def start(text: str) -> dt.datetime:
    return dt.datetime.strptime(text[:14], "%Y%m%d%H%M%S").replace(tzinfo=dt.timezone.utc)


def model(changes: list[dict]) -> list[dict]:
    """Each change with its validity, in key and sequence order."""
    rows = sorted(changes, key=lambda c: (c[KEY], c[scd2.SEQUENCE]))
    out = []
    for i, row in enumerate(rows):
        following = rows[i + 1] if i + 1 < len(rows) and rows[i + 1][KEY] == row[KEY] else None
        deleted = row["_operation"] == "D"
        end = row[scd2.SEQUENCE] if deleted else following[scd2.SEQUENCE] if following else None
        out.append({**row, scd2.VALID_TO_SEQUENCE: end, scd2.VALID_FROM: start(row[scd2.SEQUENCE]),
                    scd2.VALID_TO: start(end) if end else None, scd2.IS_CURRENT: following is None and not deleted})
    return out


def result(rows: pa.Table) -> list[dict]:
    return rows.select(list(SCHEMA.names[:-1]) + scd2.VALIDITY.names).to_pylist()


changes_strategy = st.lists(st.tuples(st.integers(0, 6), st.sampled_from("IUD"), st.integers(1, 28)),
                            max_size=40, unique_by=lambda c: (c[0], c[2]))


@settings(max_examples=200, deadline=None)
@given(changes=changes_strategy, seed=st.integers(0, 2**32 - 1))
def test_the_intervals_of_changes_in_any_order_are_the_models(changes: list[tuple[int, str, int]],
                                                              seed: int) -> None:
    rows = [{KEY: k, "_operation": op, scd2.SEQUENCE: sequence(day, n), scd2.COMMIT_VERSION: 1}
            for n, (k, op, day) in enumerate(changes)]
    np.random.default_rng(seed).shuffle(rows)
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    assert result(scd2.intervals(table, KEY)) == [{n: r[n] for n in SCHEMA.names[:-1] + scd2.VALIDITY.names}
                                                  for r in model(rows)]


@settings(max_examples=200, deadline=None)
@given(stored=changes_strategy, batch=changes_strategy, split=st.integers(0, 40), dropped=st.sets(st.integers(0, 39)))
def test_stored_versions_and_a_batch_give_the_models_intervals(stored: list[tuple[int, str, int]],
                                                              batch: list[tuple[int, str, int]], split: int,
                                                              dropped: set[int]) -> None:
    """As `record` gives them: the stored versions with their validity, in two files read
    in either order, then the batch's changes (late ones included) in file order. Positions
    leave out stored rows the batch records again; the keys the batch changes get their
    validity computed, the others keep theirs."""
    versions = model([{KEY: k, "_operation": op, scd2.SEQUENCE: sequence(day, 0), scd2.COMMIT_VERSION: 1}
                      for k, op, day in stored])
    stored_rows = versions[split:] + versions[:split]  # a key's rows may straddle the files, read out of order
    new = [{KEY: k, "_operation": op, scd2.SEQUENCE: sequence(day, 1 + n), scd2.COMMIT_VERSION: 2}
           for n, (k, op, day) in enumerate(batch)]
    changed = np.unique(np.array([r[KEY] for r in new], np.int64))
    kept = [i for i, r in enumerate(stored_rows) if i not in dropped or r[KEY] not in changed]
    rows = pa.Table.from_pylist(stored_rows + new, schema=pa.unify_schemas([SCHEMA, scd2.VALIDITY]))
    positions = np.array(kept + list(range(len(stored_rows), rows.num_rows)), np.int64)
    expected = model([{n: stored_rows[i][n] for n in SCHEMA.names} for i in kept] +
                     [{n: r[n] for n in SCHEMA.names} for r in new])
    written = result(scd2.versions(rows, KEY, positions, len(stored_rows), changed))
    assert [r[KEY] for r in written] == sorted(r[KEY] for r in written)  # clustered by key
    # (a key the batch leaves alone keeps its rows as read: in sequence order or not, as are its intervals)
    assert sorted(written, key=lambda r: (r[KEY], r[scd2.SEQUENCE])) == \
        [{n: r[n] for n in SCHEMA.names[:-1] + scd2.VALIDITY.names} for r in expected]
