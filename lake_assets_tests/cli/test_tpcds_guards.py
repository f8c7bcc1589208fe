"""TPC-DS day objects have insurance's guards, as a user meets them (issue 28, item 4).

Each test starts from a fresh lake with a tiny star (a few dimension rows, hand-made day
objects of a few rows), loads two days, then delivers a bad day object beside a new day
and a correction, and checks with `lake run`, `lake status`, `lake query` and `lake
approve` that the bad object is one line in `lake status` (held, or refused, with why),
that everything else pending applied in the same run, and that every raw row is accounted.
Before: an empty re-delivery deleted its day; a gzip'd day failed the web_sales step (exit 1,
everything else still pending, run after run); a day folder outside the calendar failed the
step or ended `lake run` in a traceback.
"""

import datetime as dt
import gzip
import json

import pytest

from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.schema import RAW, date_sk
from lake_assets_tests.helpers.cli import lake
from lake_assets_tests.helpers.raw_status import assert_every_row_accounted, status
from lake_assets_tests.helpers.tpcds import day_line, fact_key, land_small_dimensions, put_day

DAY1, DAY2, DAY3 = dt.date(2000, 1, 1), dt.date(2000, 1, 2), dt.date(2000, 1, 4)
CORRECTION = f"{RAW.corrections}20240101-000000000.dat"
ITEMS = range(1, 5)


def rows_per_day() -> dict[dt.date, int]:
    code, out = lake("query", "SELECT ws_sold_date_sk AS day, count(*) AS n FROM tpcds.web_sales GROUP BY 1",
                     "--format", "json")
    assert code == 0, out
    return {day: row["n"] for row in json.loads(out) for day in (DAY1, DAY2, DAY3) if date_sk(day) == row["day"]}


def quantity(day: dt.date, item: int) -> int:
    code, out = lake("query", f"SELECT ws_quantity AS q FROM tpcds.web_sales WHERE ws_sold_date_sk = {date_sk(day)} "
                              f"AND ws_item_sk = {item}", "--format", "json")
    assert code == 0, out
    return json.loads(out)[0]["q"]


def two_days_loaded(storage: LakeStorage) -> None:
    """A fresh lake: the dimensions and two days of four rows each, loaded."""
    land_small_dimensions(storage, [DAY1, DAY2, DAY3])
    put_day(storage, DAY1, [day_line(DAY1, item, 1) for item in ITEMS])
    put_day(storage, DAY2, [day_line(DAY2, item, 2) for item in ITEMS])
    code, out = lake("run")
    assert code == 0, out
    assert rows_per_day() == {DAY1: 4, DAY2: 4}


def beside_it(storage: LakeStorage) -> None:
    """What else is pending with the bad object: a new day, and a correction of a DAY1 row."""
    put_day(storage, DAY3, [day_line(DAY3, item, 3) for item in range(1, 4)])
    storage.put_bytes(CORRECTION, f"U|{day_line(DAY1, 2, 1, quantity=7)}\n".encode())


def the_rest_applied(rows: dict[str, dict]) -> None:
    assert rows[fact_key(DAY3)]["status"] == "applied" and rows[fact_key(DAY3)]["applied"] == 3
    assert rows[CORRECTION]["status"] == "applied" and rows[CORRECTION]["applied"] == 1
    assert quantity(DAY1, 2) == 7


@pytest.mark.e2e
def test_an_empty_or_shrinking_day_is_held_until_approved_and_blocks_nothing(lake_env: LakeStorage,
                                                                            catalog: LakeCatalog) -> None:
    storage = lake_env
    two_days_loaded(storage)
    storage.put_bytes(fact_key(DAY1), b"")  # a 0-byte re-delivery
    put_day(storage, DAY2, [day_line(DAY2, 1, 2)])  # one row of four: shrinks the day by 75 %
    beside_it(storage)

    code, out = lake("run")
    assert code == 0, out
    assert f"held: {fact_key(DAY1)}: empty" in out and f"held: {fact_key(DAY2)}: shrinks" in out, out
    assert rows_per_day() == {DAY1: 4, DAY2: 4, DAY3: 3}  # both days keep their rows
    rows = status()
    assert rows[fact_key(DAY1)]["status"] == rows[fact_key(DAY2)]["status"] == "held"
    assert rows[fact_key(DAY1)]["detail"].startswith("empty: ")
    assert rows[fact_key(DAY2)]["detail"].startswith("shrinks: it would shrink the day 2000-01-02 from 4 to 1 rows")
    assert f"lake approve {fact_key(DAY2)}" in rows[fact_key(DAY2)]["detail"]
    the_rest_applied(rows)
    assert_every_row_accounted(rows)

    code, out = lake("run")  # held is not pending: a plain run leaves it alone
    assert code == 0 and "tpcds: nothing pending" in out, out

    code, out = lake("approve", fact_key(DAY2))
    assert code == 0, out
    assert rows_per_day() == {DAY1: 4, DAY2: 1, DAY3: 3}
    code, out = lake("approve", "--all")
    assert code == 0, out
    # the empty day is published: its rows go, but the correction applied while it was held is newer and stays
    assert rows_per_day() == {DAY1: 1, DAY2: 1, DAY3: 3} and quantity(DAY1, 2) == 7
    rows = status()
    assert rows[fact_key(DAY1)]["status"] == rows[fact_key(DAY2)]["status"] == "applied"
    assert_every_row_accounted(rows)


@pytest.mark.e2e
def test_a_gzipped_day_is_refused_whole_and_blocks_nothing(lake_env: LakeStorage, catalog: LakeCatalog) -> None:
    storage = lake_env
    two_days_loaded(storage)
    lines = [day_line(DAY2, item, 2, quantity=5) for item in ITEMS]
    storage.put_bytes(fact_key(DAY2), gzip.compress("".join(f"{line}\n" for line in lines).encode()))
    beside_it(storage)

    code, out = lake("run")
    assert code == 3, out  # a file refused whole, everything else applied
    assert f"refused: {fact_key(DAY2)}: bad_encoding" in out, out
    assert rows_per_day() == {DAY1: 4, DAY2: 4, DAY3: 3} and quantity(DAY2, 1) == 1  # the day keeps its rows
    rows = status()
    assert rows[fact_key(DAY2)]["status"] == "rejected"
    assert rows[fact_key(DAY2)]["detail"].startswith("bad_encoding: gzip-compressed, not UTF-8 text")
    the_rest_applied(rows)
    assert_every_row_accounted(rows)
    code, out = lake("run")
    assert code == 0 and "tpcds: nothing pending" in out, out

    put_day(storage, DAY2, lines)  # delivered again, as text
    code, out = lake("run")
    assert code == 0, out
    assert rows_per_day()[DAY2] == 4 and quantity(DAY2, 1) == 5
    assert_every_row_accounted(status())


@pytest.mark.e2e
def test_a_day_outside_the_calendar_is_refused_by_its_place_and_blocks_nothing(lake_env: LakeStorage,
                                                                               catalog: LakeCatalog) -> None:
    storage = lake_env
    two_days_loaded(storage)
    late, early = dt.date(2010, 1, 1), dt.date(1990, 6, 1)
    for day in (late, early):
        put_day(storage, day, [day_line(day, item, 9) for item in (1, 2)])
    beside_it(storage)

    code, out = lake("run")
    assert code == 0, out
    assert "Traceback" not in out and "run failed" not in out, out
    code, out = lake("query", "SELECT count(*) AS n FROM tpcds.web_sales WHERE ws_order_number = 9", "--format", "json")
    assert json.loads(out) == [{"n": 0}]  # never loaded
    rows = status()
    for day in (late, early):
        line = rows[fact_key(day)]
        assert line["status"] not in ("applied", "pending") and line["applied"] is None, line
        assert "outside the calendar of tpcds.web_sales (1998-01-02..2003-01-02)" in line["detail"], line
    the_rest_applied(rows)
    assert_every_row_accounted(rows)
    code, out = lake("run")
    assert code == 0 and "tpcds: nothing pending" in out, out
