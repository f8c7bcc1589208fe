"""A corrections batch is well-formed CDC and realistic: consistent amounts, real keys, whole cancelled orders."""

import datetime as dt
from decimal import Decimal

import pytest

from lake_assets.core.errors import UsageError
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds import raw_contract as contract
from lake_assets.tpcds.correction_batch import land_corrections
from lake_assets.tpcds.raw_duckdb import dsdgen_columns, raw_connection, read_raw_sql
from lake_assets_tests.helpers.tpcds import fact_key, generated, land_facts, sold_dates

COUNT = 200


@pytest.fixture(scope="module")
def batch(raw_star):
    storage, _ = raw_star
    at = dt.datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=dt.timezone.utc)
    result = land_corrections(storage, COUNT, seed=7, at=at)
    con = raw_connection(storage)
    con.execute(f"CREATE TABLE batch AS SELECT * FROM "
                f"{read_raw_sql(storage.uri(result.key), contract.FACT, with_operation=True)}")
    return storage, result, con


def test_object_name_and_field_counts(batch):
    storage, result, _ = batch
    assert result.key == "raw/tpcds/web_sales_cdc/20260304-050607890.dat"
    body, _ = storage.get_bytes(result.key)
    lines = body.decode().rstrip("\n").split("\n")
    assert len(lines) == COUNT == result.inserts + result.updates + result.deletes
    width = len(dsdgen_columns()[contract.FACT]) + 1
    assert all(line.count("|") == width - 1 and line[0] in "IUD" for line in lines)


def test_mix_and_keys(batch):
    _, result, con = batch
    assert result.updates > COUNT // 2 and result.deletes > 0 and result.inserts > 0
    assert con.execute("SELECT count(*) - count(DISTINCT (ws_item_sk, ws_order_number)) FROM batch").fetchone()[0] == 0
    known = con.execute("""
        SELECT op, count(*) FILTER (WHERE w.ws_item_sk IS NOT NULL), count(*) FROM batch b
        LEFT JOIN lake.tpcds.web_sales w USING (ws_item_sk, ws_order_number) GROUP BY op""").fetchall()
    for op, existing, total in known:
        assert existing == (0 if op == "I" else total), op
    # cancellations cover whole orders
    partial = con.execute("""
        SELECT count(*) FROM lake.tpcds.web_sales w JOIN (SELECT DISTINCT ws_order_number FROM batch WHERE op = 'D') d
        USING (ws_order_number) ANTI JOIN (SELECT * FROM batch WHERE op = 'D') b USING (ws_item_sk, ws_order_number)
        WHERE w.ws_item_sk IS NOT NULL""").fetchone()[0]
    assert partial == 0


def test_amounts_are_consistent(batch):
    _, _, con = batch
    rows = con.execute("""
        SELECT ws_quantity, ws_list_price, ws_sales_price, ws_wholesale_cost, ws_ext_discount_amt, ws_ext_sales_price,
               ws_ext_wholesale_cost, ws_ext_list_price, ws_ext_tax, ws_coupon_amt, ws_ext_ship_cost, ws_net_paid,
               ws_net_paid_inc_tax, ws_net_paid_inc_ship, ws_net_paid_inc_ship_tax, ws_net_profit
        FROM batch WHERE op IN ('I', 'U')""").fetchall()
    assert rows
    for (q, lp, sp, wc, disc, ext_sales, ext_wc, ext_list, tax, coupon, ship, paid, paid_tax, paid_ship,
         paid_ship_tax, profit) in rows:
        assert 1 <= q <= 100 and sp <= lp
        assert ext_sales == q * sp and ext_list == q * lp and ext_wc == q * wc and disc == q * (lp - sp)
        assert paid == ext_sales - coupon and paid_tax == paid + tax and paid_ship == paid + ship
        assert paid_ship_tax == paid + ship + tax and profit == paid - ext_wc
        assert all(isinstance(v, Decimal) and abs(v) < Decimal("100000") for v in (ext_sales, profit, paid_ship_tax))


def test_updates_change_quantity_or_price(batch):
    _, _, con = batch
    unchanged, total = con.execute("""
        SELECT count(*) FILTER (WHERE b.ws_quantity = w.ws_quantity AND b.ws_sales_price = w.ws_sales_price), count(*)
        FROM batch b JOIN lake.tpcds.web_sales w USING (ws_item_sk, ws_order_number) WHERE op = 'U'""").fetchone()
    assert unchanged <= total * 0.05, (unchanged, total)


def test_too_many_corrections_are_refused(raw_star):
    storage, result = raw_star
    with pytest.raises(UsageError, match="more than half"):
        land_corrections(storage, result.rows[contract.FACT])


def test_lines_the_loader_quarantines_are_not_drawn_from(storage: LakeStorage) -> None:
    """A day object with malformed lines, and a correction file with one: the batch is still
    computed (no DuckDB error), from the valid lines only."""
    oracle = generated(0.01)
    days = sold_dates(oracle)[:40]
    land_facts(storage, oracle, days)
    day = fact_key(days[0])
    body = storage.get_bytes(day)[0].decode()
    fields = body.splitlines()[0].split("|")
    bad_number = "|".join([*fields[:18], "lots", *fields[19:]])  # ws_quantity does not cast
    storage.put_bytes(day, f"{body}too|few|fields\n{bad_number}\n".encode())
    storage.put_bytes(f"{contract.CDC_PREFIX}20240101-000000000.dat", b"U|not|a|line\n")

    con = raw_connection(storage)
    valid = con.execute("SELECT count(*) FROM lake.tpcds.web_sales").fetchone()[0]
    assert valid == sum(len(storage.get_bytes(fact_key(d))[0].decode().splitlines()) for d in days) - 2

    result = land_corrections(storage, 10, seed=1)
    lines = storage.get_bytes(result.key)[0].decode().splitlines()
    assert len(lines) == 10 == result.inserts + result.updates + result.deletes
    assert "lots" not in "".join(lines)
