"""`lake query --engine duckdb`: DuckDB reads the same named tables as Sail and returns the same rows."""

import pytest

from lake_assets.core.errors import UsageError
from lake_assets_tests.helpers.insurance_tables import INSURANCE
from lake_assets.resources import duckdb_reader, duckdb_sandbox
from lake_assets.tpcds.reports import REPORTS
from lake_assets_tests.helpers.results import assert_same_rows


@pytest.fixture(scope="module")
def duck(raw_star, star_engine):
    storage, _ = raw_star
    # a Delta table beside the Iceberg star, where the registry says `insurance` lives
    star_engine.sql("SELECT id AS policy_id, id * 2 AS premium FROM range(25)").write.format("delta") \
        .mode("overwrite").save(INSURANCE.uri(storage))
    con = duckdb_reader.lake_connection(storage)
    yield con
    con.close()


@pytest.mark.parametrize("report", REPORTS, ids=[r.name for r in REPORTS])
def test_reports_equal_on_both_engines(report, duck, star_engine):
    columns, rows = duckdb_sandbox.read_only_query(duck, report.sql)
    frame = star_engine.sql(report.sql)
    assert [c.lower() for c in columns] == [c.lower() for c in frame.columns]
    assert_same_rows(rows, [tuple(r) for r in frame.collect()], report.name)


def test_delta_and_iceberg_tables_by_name(duck, star_engine):
    sql = ("SELECT count(*), sum(premium) FROM insurance "
           "UNION ALL SELECT count(*), sum(i_item_sk) FROM tpcds.item")
    _, rows = duckdb_sandbox.read_only_query(duck, sql)
    assert rows[0] == (25, 600)
    item_count = star_engine.sql("SELECT count(*), sum(i_item_sk) FROM tpcds.item").collect()[0]
    assert rows[1] == tuple(item_count)


@pytest.mark.parametrize("sql", ["DELETE FROM tpcds.item", "CREATE TABLE x AS SELECT 1",
                                 "SELECT 1; SELECT 2", "ATTACH 'x.db'"])
def test_only_reads_are_run(duck, sql):
    with pytest.raises(UsageError):
        duckdb_sandbox.read_only_query(duck, sql)
    assert duck.sql("SELECT count(*) FROM tpcds.item").fetchone()[0] > 0
