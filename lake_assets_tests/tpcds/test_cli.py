"""`lake query --engine duckdb`, `lake restore` (and `lake rollback`) and `lake tpcds corrections` on the TPC-DS star."""

import datetime as dt
import json
import os

import pytest
from typer.testing import CliRunner

from lake_assets.cli import app
from lake_assets.core.tables import TPCDS_REPORTS, table
from lake_assets.tpcds.raw_contract import CDC_PREFIX
from lake_assets.tpcds.reports import REPORTS, REPORTS_BY_NAME

runner = CliRunner()


@pytest.fixture
def lake(raw_star, star_engine, monkeypatch):
    storage, _ = raw_star
    monkeypatch.setenv("LAKE_HOME", storage.home)
    monkeypatch.setenv("LAKE_S3_BUCKET", storage.bucket)
    monkeypatch.delenv("LAKE_S3_ENDPOINT", raising=False)
    monkeypatch.setenv("DAGSTER_HOME", os.environ.get("DAGSTER_HOME", ""))

    def invoke(*args: str) -> tuple[int, str]:
        result = runner.invoke(app, list(args))
        return result.exit_code, result.output
    return invoke


def test_every_report_has_a_registered_table():
    assert {t.name for t in TPCDS_REPORTS} == {r.table for r in REPORTS}
    assert all(table(r.table).format == "iceberg" for r in REPORTS)


def test_query_engine_duckdb(lake, star_engine):
    sql = "SELECT i_category, count(*) AS n FROM tpcds.item GROUP BY i_category ORDER BY i_category NULLS LAST"
    code, output = lake("query", "--engine", "duckdb", "--format", "json", sql)
    assert code == 0, output
    expected = [{"i_category": r[0], "n": r[1]} for r in star_engine.sql(sql).collect()]
    assert json.loads(output) == expected
    code, output = lake("query", "--engine", "duckdb", "DELETE FROM tpcds.item")
    assert code == 2 and "only reads" in output


def test_rollback_an_iceberg_table(lake, raw_star, star_engine):
    storage, _ = raw_star
    item = table("tpcds.item")
    rows = star_engine.table(item.engine_name).count()
    good = storage.catalog().pyiceberg().load_table(item.name).current_snapshot().snapshot_id
    star_engine.sql(f"INSERT INTO {item.engine_name} SELECT * FROM {item.engine_name}")  # a bad write
    assert star_engine.table(item.engine_name).count() == 2 * rows
    bad = storage.catalog().pyiceberg().load_table(item.name).current_snapshot()
    code, output = lake("rollback", item.name, "--snapshot", str(good))  # the older name of `lake restore`
    assert code == 0, output
    assert star_engine.table(item.engine_name).count() == rows
    as_of = dt.datetime.fromtimestamp(bad.timestamp_ms / 1000, dt.timezone.utc).isoformat()
    code, output = lake("restore", item.name, "--as-of", as_of)  # the snapshot current then: the bad one
    assert code == 0, output
    assert f"-> {bad.snapshot_id}" in output and star_engine.table(item.engine_name).count() == 2 * rows
    code, output = lake("restore", item.name, "--version", str(good))
    assert code == 0, output
    assert star_engine.table(item.engine_name).count() == rows
    code, output = lake("rollback", item.name, "--snapshot", "42")
    assert code == 2 and "no snapshot 42" in output
    # a report is rebuilt from the star, never restored alone
    code, output = lake("restore", REPORTS_BY_NAME["top_customers"].table, "--version", str(good))
    assert code == 2 and "cannot be restored alone" in output and "`lake restore tpcds.web_sales" in output


def test_corrections_command(lake, raw_star):
    storage, _ = raw_star
    before = {o["Key"] for o in storage.list_objects(CDC_PREFIX)}
    code, output = lake("tpcds", "corrections", "50", "--seed", "3")
    assert code == 0, output
    [key] = {o["Key"] for o in storage.list_objects(CDC_PREFIX)} - before
    body, _ = storage.get_bytes(key)
    assert len(body.decode().splitlines()) == 50
    storage.delete_prefix(key)
