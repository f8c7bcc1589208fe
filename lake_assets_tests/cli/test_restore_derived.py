"""A derived table goes back with its table, never alone (issue 28, item 6b), as a user meets it.

Before: `lake restore insurance_history` was accepted and left the history out of step for
good (every later `lake run` committed its file, then failed the blocking check
`matches_table` on `insurance_history`); the TPC-DS derived tables could be restored alone too,
and a restore of `tpcds.web_sales` left the reports computed from the table it replaced.
"""

import datetime as dt
import json

import pytest

from lake_assets.core.formats.delta import current_version
from lake_assets_tests.helpers.insurance_tables import INSURANCE_HISTORY
from lake_assets_tests.helpers.insurance_tables import DATA_COLUMN_NAMES
from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.cli import lake
from lake_assets_tests.helpers.raw_status import assert_every_row_accounted, status
from lake_assets_tests.helpers.tpcds import day_line, land_small_dimensions, put_day

HEADER = ",".join(DATA_COLUMN_NAMES)


def row(key: int, value: int) -> str:
    return f"{key},2024-01-31,Urban,CA,West,{value},Retail,N,Y"


def query(sql: str) -> list[dict]:
    code, out = lake("query", sql, "--format", "json")
    assert code == 0, out
    return json.loads(out)


def refused_alone(name: str, restore_instead: str) -> None:
    code, out = lake("restore", name, "--version", "0")
    assert code == 2, out
    assert len(out.strip().splitlines()) == 1 and f"{name} cannot be restored alone" in out, out
    assert f"`lake restore {restore_instead} --version N`" in out, out


def test_insurance_goes_back_with_its_history_and_its_derived_tables_never_alone(lake_env: LakeStorage) -> None:
    storage = lake_env
    storage.put_bytes("raw/fullload/LOAD00000001.csv", "\n".join([HEADER, row(1, 1), row(2, 2), ""]).encode())
    assert lake("run")[0] == 0
    storage.put_bytes("raw/cdcload/20240101-090000000.csv", f"U,{row(1, 10)}\nD,{row(2, 0)}\n".encode())
    assert lake("run")[0] == 0
    history_version = current_version(storage, INSURANCE_HISTORY)
    for name in ("insurance_history", "insurance_changes", "insurance_quarantine", "insurance_tombstones"):
        refused_alone(name, "insurance")
    assert current_version(storage, INSURANCE_HISTORY) == history_version

    code, out = lake("restore", "insurance", "--version", "0")  # brings its history along
    assert code == 0, out
    current = query("SELECT policy_id, insured_value FROM insurance_history WHERE is_current ORDER BY policy_id")
    assert current == query("SELECT policy_id, insured_value FROM insurance ORDER BY policy_id") == [
        {"policy_id": 1, "insured_value": 1}, {"policy_id": 2, "insured_value": 2}]
    storage.put_bytes("raw/cdcload/20240102-090000000.csv", f"I,{row(3, 3)}\n".encode())
    code, out = lake("run")  # the blocking history check passes
    assert code == 0, out
    assert "check insurance_history: matches_table: passed" in out, out
    assert_every_row_accounted(status())


@pytest.mark.e2e
def test_tpcds_derived_tables_never_alone_and_a_star_restore_rebuilds_the_reports(lake_env: LakeStorage,
                                                                                  catalog: LakeCatalog) -> None:
    storage = lake_env
    days = [dt.date(2000, 1, 1), dt.date(2000, 1, 2)]
    land_small_dimensions(storage, days)
    put_day(storage, days[0], [day_line(days[0], item, 1) for item in range(1, 4)])
    assert lake("run")[0] == 0
    code, out = lake("history", "tpcds.web_sales", "--format", "json")
    one_day = json.loads(out)[0]["snapshot_id"]
    put_day(storage, days[1], [day_line(days[1], item, 2) for item in range(1, 5)])
    assert lake("run")[0] == 0
    lines = "SELECT sum(order_lines) AS n FROM tpcds.report_sales_by_hour"
    assert query(lines) == [{"n": 7}]

    for name in ("web_sales_tombstones", "tpcds_tombstones", "web_sales_quarantine", "tpcds_quarantine",
                 "tpcds.report_sales_by_hour"):
        refused_alone(name, "tpcds.web_sales")
    assert query(lines) == [{"n": 7}]

    code, out = lake("restore", "tpcds.web_sales", "--version", str(one_day))
    assert code == 0, out
    assert "reports rebuilt from the restored tpcds.web_sales" in out, out
    assert query("SELECT count(*) AS n FROM tpcds.web_sales") == query(lines) == [{"n": 3}]
    code, out = lake("run")
    assert code == 0 and "tpcds: nothing pending" in out, out
    assert_every_row_accounted(status())
