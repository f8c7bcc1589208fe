"""Every report computed by Sail from the Iceberg star equals DuckDB running the same SQL on the raw files."""

import pytest

from lake_assets.tpcds.report_tables import refresh_report
from lake_assets.tpcds.reports import REPORTS
from lake_assets.tpcds.raw_duckdb import raw_connection
from lake_assets_tests.helpers.results import assert_same_rows


@pytest.fixture(scope="module")
def oracle(raw_star):
    """DuckDB over the raw `|` files: views lake.tpcds.<table>."""
    storage, _ = raw_star
    con = raw_connection(storage)
    yield con
    con.close()


def test_reports_have_rows_at_small_scale(oracle):
    """The comparisons below are not vacuous: most reports return rows at SF 0.01."""
    non_empty = [r.name for r in REPORTS if oracle.execute(r.sql).fetchall()]
    assert len(non_empty) >= len(REPORTS) - 1, non_empty


@pytest.mark.parametrize("report", REPORTS, ids=[r.name for r in REPORTS])
def test_report_table_equals_duckdb_on_raw(report, star_engine, oracle):
    spark = star_engine
    refresh = refresh_report(spark, report)
    actual = [tuple(row) for row in spark.table(report.table).collect()]
    expected = oracle.execute(report.sql).fetchall()
    assert refresh.rows == len(expected)
    assert_same_rows(actual, expected, report.name)


def test_refresh_replaces_the_report_in_one_snapshot(star_engine, star_catalog):
    report = REPORTS[0]
    first = refresh_report(star_engine, report)
    table = star_catalog.pyiceberg().load_table(report.table)
    before = len(table.snapshots())
    second = refresh_report(star_engine, report)
    table = table.refresh()
    assert not second.created and second.rows == first.rows
    assert len(table.snapshots()) == before + 1
    assert table.current_snapshot().summary.operation.value == "overwrite"
