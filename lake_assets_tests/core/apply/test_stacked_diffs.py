"""The two stacked-row diffs on the engine against small pure-Python models.

`feed.change_rows` (a commit's change feed from the rows it replaced and wrote) and the history
check's `_differences` (the history's current rows against the table) each read their two sides
once, stacked and grouped; the models below say what they must give: Delta CDF's change types,
and EXCEPT ALL's multiset differences. Random small frames with repeated rows, NULLs and
repeated keys, on the session's Sail engine. The check's cheaper first query (`_same`, hashed
sums) must pass exactly the sides `_differences` finds equal with one row per key.
"""

import datetime as dt
import random
from collections import Counter

import pytest
from pyspark.sql import SparkSession

from lake_assets.core.apply.feed import change_rows
from lake_assets.core.change_feed import CHANGE_TYPE
from lake_assets.declared.checks import _differences, _same

SCHEMA = "id INT, name STRING, amount INT"
COLUMNS = ["id", "name", "amount"]
Row = tuple[int, str | None, int | None]


def _rows(seed: int, count: int) -> list[Row]:
    chance = random.Random(seed)
    return [(chance.randint(1, 6), chance.choice(["a", "b", None]), chance.choice([1, 2, None]))
            for _ in range(count)]


def feed_model(removed: list[Row], added: list[Row]) -> Counter:
    """Delta CDF of a copy-on-write commit: rows equal on both sides are carried over; per key,
    only removed -> delete, only added -> insert, both -> pre- and post-image (distinct rows)."""
    before, after = set(removed) - set(added), set(added) - set(removed)
    updated = {r[0] for r in before} & {r[0] for r in after}
    return Counter([(r, "update_preimage" if r[0] in updated else "delete") for r in before]
                   + [(r, "update_postimage" if r[0] in updated else "insert") for r in after])


def differences_model(current: list[Row], table: list[Row]) -> dict[str, int]:
    history, live = Counter(current), Counter(table)
    per_key = Counter(r[0] for r in current)
    return {"current_rows": len(current), "table_rows": len(table),
            "keys_with_several_current_rows": sum(1 for n in per_key.values() if n > 1),
            "rows_only_in_history": sum((history - live).values()), "rows_only_in_table": sum((live - history).values())}


@pytest.mark.parametrize("seed", range(6))
def test_change_rows_are_delta_cdf_of_the_commit(spark: SparkSession, seed: int) -> None:
    removed, added = _rows(seed, 8), _rows(seed + 100, 8) + _rows(seed, 3)  # some carried over
    rows = change_rows(spark.createDataFrame(removed, SCHEMA), spark.createDataFrame(added, SCHEMA), ["id"], COLUMNS,
                       7, dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)).collect()
    assert Counter(((r["id"], r["name"], r["amount"]), r[CHANGE_TYPE]) for r in rows) == feed_model(removed, added)
    assert {r["_commit_version"] for r in rows} <= {7}


@pytest.mark.parametrize("seed", range(6))
def test_history_differences_are_except_all_counts(spark: SparkSession, seed: int) -> None:
    current, table = _rows(seed, 7) + _rows(seed, 2), _rows(seed + 50, 5) + _rows(seed, 4)
    found = _differences(spark.createDataFrame(current, SCHEMA), spark.createDataFrame(table, SCHEMA), ["id"])
    assert found == differences_model(current, table)


@pytest.mark.parametrize("seed", range(6))
def test_the_hashed_comparison_passes_only_equal_sides_with_a_row_per_key(spark: SparkSession, seed: int) -> None:
    chance = random.Random(seed)
    table = [(key, chance.choice(["a", "b", None]), chance.choice([1, 2, None])) for key in range(1, 9)]
    shuffled = table[:]
    chance.shuffle(shuffled)

    def same(current: list[Row]) -> dict[str, int] | None:
        return _same(spark.createDataFrame(current, SCHEMA), spark.createDataFrame(table, SCHEMA), ["id"])

    assert same(shuffled) == differences_model(shuffled, table)
    changed = [*shuffled[1:], (shuffled[0][0], "c", 3)]  # one key's values differ
    for current in (changed, shuffled + shuffled[:1], shuffled[1:]):  # a value, a key twice, a key missing
        assert same(current) is None and differences_model(current, table) != differences_model(table, table)


def test_a_null_trading_places_with_a_value_is_a_difference(spark: SparkSession) -> None:
    """xxhash64 skips a NULL, so (NULL, x) and (x, NULL) hash alike unless the NULLs are hashed too."""
    schema = "id INT, a STRING, b STRING"
    current, table = spark.createDataFrame([(1, None, "x")], schema), spark.createDataFrame([(1, "x", None)], schema)
    assert _same(current, table, ["id"]) is None
    assert _differences(current, table, ["id"])["rows_only_in_history"] == 1
