"""`lake run`, `status`, `backfill`, `query --version/--as-of` and `history` on the TPC-DS tables."""

import json

import pytest

from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.cli import lake
from lake_assets_tests.helpers.tpcds import fact_key, generated, land_dimensions, land_facts, sold_dates


@pytest.mark.e2e
def test_run_status_backfill_history_time_travel(lake_env: LakeStorage, catalog: LakeCatalog) -> None:
    oracle = generated(0.01)
    days = sold_dates(oracle)[:4]
    land_dimensions(lake_env, oracle)
    land_facts(lake_env, oracle, [*days, None])

    code, out = lake("status", "--format", "json")
    tpcds = [r for r in json.loads(out) if r["file"].startswith("raw/tpcds/")]
    assert code == 0 and len(tpcds) == 4 + 5 and {r["status"] for r in tpcds} == {"pending"}

    code, run_out = lake("run")
    assert code == 0, run_out
    assert "tpcds/web_sales" in run_out and "FAILED" not in run_out
    code, out = lake("status", "--format", "json")
    assert {r["status"] for r in json.loads(out) if r["file"].startswith("raw/tpcds/")} == {"applied"}
    expected = oracle.sql(f"SELECT count(*) FROM web_sales LEFT JOIN date_dim ON ws_sold_date_sk = d_date_sk "
                          f"WHERE d_date IN ({', '.join(repr(str(d)) for d in days)}) OR ws_sold_date_sk IS NULL"
                          ).fetchone()[0]
    code, out = lake("query", "SELECT count(*) AS n FROM tpcds.web_sales", "--format", "json")
    assert code == 0 and json.loads(out) == [{"n": expected}]

    code, out = lake("history", "tpcds.web_sales", "--format", "json")
    first_snapshot = json.loads(out)[0]["snapshot_id"]
    # history and the run agree: the snapshot's rows applied (ledger) are what `lake run` said of its files
    assert json.loads(out)[0]["rows_applied"] == expected
    assert f"-> tpcds.web_sales snapshot {first_snapshot} ({expected} rows)" in run_out, run_out
    # the table's line counts the run's objects and rows, not one day's partition
    assert f"tpcds/web_sales: 5 object(s), rows 0 -> {expected} ({expected} applied" in run_out, run_out

    # the second day's object is re-delivered with one row less; backfill that one day
    lines = lake_env.get_bytes(fact_key(days[1]))[0].decode().splitlines()
    lake_env.put_bytes(fact_key(days[1]), ("\n".join(lines[1:]) + "\n").encode())
    code, out = lake("backfill", "tpcds.web_sales", "--from", str(days[1]), "--to", str(days[1]))
    assert code == 0, out
    code, out = lake("query", "SELECT count(*) AS n FROM tpcds.web_sales", "--format", "json")
    assert json.loads(out) == [{"n": expected - 1}]

    code, out = lake("history", "tpcds.web_sales", "--format", "json")
    history = json.loads(out)
    assert history[1]["snapshot_id"] == first_snapshot and history[0]["total_records"] == expected - 1
    code, out = lake("query", "SELECT count(*) AS n FROM tpcds.web_sales", "--version", str(first_snapshot),
                     "--format", "json")
    assert code == 0 and json.loads(out) == [{"n": expected}], out
    code, out = lake("query", "SELECT count(*) AS n FROM tpcds.web_sales", "--as-of", history[0]["timestamp"],
                     "--format", "json")
    assert code == 0 and json.loads(out) == [{"n": expected - 1}], out

    assert lake("backfill", "tpcds.item", "--from", "2000-01-01", "--to", "2000-01-02")[0] == 2
    assert lake("backfill", "tpcds.web_sales", "--from", "2000-01-03", "--to", "2000-01-02")[0] == 2
    assert lake("backfill", "tpcds.web_sales", "--from", "1990-01-01", "--to", "2000-01-02")[0] == 2
