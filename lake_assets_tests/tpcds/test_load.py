"""Loading raw TPC-DS objects into the Iceberg star, checked against DuckDB's generator."""

from decimal import Decimal

import duckdb
import pytest
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from lake_assets.core.formats import iceberg
from lake_assets.core.ledger import HELD, Ledger
from lake_assets.core.snapshot_guard import approve
from lake_assets.core.quarantine import QUARANTINE_SCHEMA
from lake_assets.core.tables import TPCDS_QUARANTINE, table
from lake_assets.resources.engine import SparkEngine
from lake_assets.tpcds.assets import quarantine_counts
from lake_assets.tpcds.checks import evaluate_rows_match_raw
from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.load import fact_objects, load_dimension, load_fact_days, pending_dimensions, pending_fact_days
from lake_assets.tpcds.pending import held_objects
from lake_assets.tpcds.schema import COLUMNS, DIMENSIONS, QUARANTINES, TpcdsTable, date_sk, engine_name, ledger_name
from lake_assets_tests.helpers.tpcds import fact_key, generated, land_dimensions, land_facts, sold_dates

SCALE = 0.01
WEB_SALES = ledger_name(TpcdsTable.WEB_SALES)


def fact_rows(catalog: LakeCatalog, where: str = "") -> list[tuple]:
    con = duckdb.connect()
    catalog.attach_duckdb(con)
    columns = ", ".join(name for name, _ in COLUMNS[TpcdsTable.WEB_SALES])
    return con.sql(f"SELECT {columns} FROM {engine_name(TpcdsTable.WEB_SALES)} {where} ORDER BY ws_order_number, ws_item_sk").fetchall()


def quarantine(storage: LakeStorage) -> list[dict]:
    uri = QUARANTINES[TpcdsTable.WEB_SALES].uri(storage)  # web_sales_quarantine
    rows = DeltaTable(uri, storage_options=storage.delta_storage_options()).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda r: (r["source_file"], r["line_number"]))


@pytest.mark.e2e
def test_full_load_equals_the_generator(storage: LakeStorage, catalog: LakeCatalog, spark: SparkSession) -> None:
    oracle = generated(SCALE)
    land_dimensions(storage, oracle)
    keys = land_facts(storage, oracle)
    ledger = Ledger(storage)
    assert len(pending_fact_days(storage, ledger)) == len(keys)
    assert sorted(pending_dimensions(storage, ledger)) == sorted(DIMENSIONS)

    report = load_fact_days(storage, spark, list(fact_objects(storage)), "run-1")
    for name in DIMENSIONS:
        load_dimension(storage, spark, name, "run-1")

    expected = oracle.sql("SELECT count(*), count(*) FILTER (WHERE ws_sold_date_sk IS NULL), sum(ws_net_paid) "
                          "FROM web_sales").fetchone()
    assert report.rows_after == expected[0] == 7212
    assert expected[1] > 0  # the NULL-date rows exist and must land
    loaded = fact_rows(catalog)
    assert loaded == oracle.sql(f"SELECT {', '.join(n for n, _ in COLUMNS['web_sales'])} FROM web_sales "
                                "ORDER BY ws_order_number, ws_item_sk").fetchall()
    assert sum(1 for r in loaded if r[0] is None) == expected[1]
    for name in DIMENSIONS:
        current = iceberg.open_table(storage, table(ledger_name(name)))
        assert iceberg.row_count(current) == oracle.sql(f"SELECT count(*) FROM {name}").fetchone()[0]

    entries = ledger.entries(WEB_SALES).to_pylist()
    assert len(entries) == len(keys)
    assert sum(e["rows_in_file"] for e in entries) == sum(e["rows_applied"] for e in entries) == 7212
    assert pending_fact_days(storage, ledger) == [] and pending_dimensions(storage, ledger) == []
    # schema as declared: decimals stay decimals, truncate(365) partitions of the sold date key
    current = iceberg.open_table(storage, table(WEB_SALES))
    assert str(current.schema().find_field("ws_net_paid").field_type) == "decimal(7, 2)"
    assert [f.name for f in current.schema().fields] == [n for n, _ in COLUMNS[TpcdsTable.WEB_SALES]] + ["_sequence"]
    assert str(current.spec().fields[0].transform) == "truncate[365]"


def test_bad_lines_go_to_quarantine_with_object_and_line(
    storage: LakeStorage, catalog: LakeCatalog, spark: SparkSession
) -> None:
    oracle = generated(SCALE)
    day = sold_dates(oracle)[10]
    land_facts(storage, oracle, [day])
    key = fact_key(day)
    good = storage.get_bytes(key)[0].decode().splitlines()
    fields = good[0].split("|")
    bad_number = "|".join(fields[:18] + ["lots"] + fields[19:])
    bad_decimal = "|".join(fields[:20] + ["99999999.99"] + fields[21:])
    missing_key = "|".join(fields[:3] + [""] + fields[4:])
    other_day = "|".join([str(date_sk(day) + 1)] + fields[1:17] + ["999999991"] + fields[18:])
    lines = [good[0], "only|three|fields", bad_number, *good[1:], bad_decimal, missing_key, other_day, ""]
    storage.put_bytes(key, ("\n".join(lines) + "\n").encode())

    report = load_fact_days(storage, spark, [day], "run-bad")

    assert report.rows_after == len(good)
    rows = quarantine(storage)
    n = len(good)
    assert [(r["line_number"], r["reason"]) for r in rows] == [
        (2, "wrong_field_count"), (3, "bad_value"), (n + 3, "bad_value"), (n + 4, "missing_key"),
        (n + 5, "wrong_partition"), (n + 6, "wrong_field_count"),
    ]
    assert all(r["source_file"] == key for r in rows)
    assert rows[1]["raw_text"] == bad_number and "ws_quantity=lots is not BIGINT" in rows[1]["detail"]
    assert "ws_list_price=99999999.99" in rows[2]["detail"]
    entry = Ledger(storage).entries(ledger_name(TpcdsTable.WEB_SALES)).to_pylist()[0]
    assert (entry["rows_in_file"], entry["rows_applied"], entry["rows_quarantined"]) == (n + 6, n, 6)

    # a rerun of the same object converges: no duplicate quarantine rows, same table rows
    load_fact_days(storage, spark, [day], "run-bad-again")
    assert len(quarantine(storage)) == 6
    assert len(fact_rows(catalog)) == n


def test_rejects_an_earlier_release_quarantined_in_tpcds_quarantine_are_kept_and_counted_once(
    storage: LakeStorage, catalog: LakeCatalog, spark: SparkSession
) -> None:
    """Before web_sales had its own quarantine, its rejects (and the dimensions') went to
    `tpcds_quarantine`. Those rows stay there: the rows check counts them, the quarantine asset
    reports them, and a day loaded again, whose rejects go to `web_sales_quarantine` too, counts
    each line once."""
    oracle = generated(SCALE)
    day = sold_dates(oracle)[3]
    land_facts(storage, oracle, [day])
    key = fact_key(day)
    good = storage.get_bytes(key)[0].decode().splitlines()
    storage.put_bytes(key, ("\n".join([*good, "only|three|fields", "x"]) + "\n").encode())
    load_fact_days(storage, spark, [day], "run-earlier")
    # as an earlier release left it: the rejects in tpcds_quarantine, none in web_sales_quarantine
    write_deltalake(TPCDS_QUARANTINE.uri(storage), pa.Table.from_pylist(quarantine(storage), QUARANTINE_SCHEMA),
                    storage_options=storage.delta_storage_options())
    storage.delete_prefix(f"{QUARANTINES[TpcdsTable.WEB_SALES].prefix}/")
    engine = SparkEngine()
    assert evaluate_rows_match_raw(storage, engine).passed
    assert quarantine_counts(storage) == {"tpcds_quarantine": {"wrong_field_count": 2}}

    load_fact_days(storage, spark, [day], "run-again")  # a backfill of the day: its rejects quarantined again
    assert [(r["line_number"], r["reason"]) for r in quarantine(storage)] == [(len(good) + 1, "wrong_field_count"),
                                                                              (len(good) + 2, "wrong_field_count")]
    assert evaluate_rows_match_raw(storage, engine).passed
    assert quarantine_counts(storage) == {"web_sales_quarantine": {"wrong_field_count": 2},
                                          "tpcds_quarantine": {"wrong_field_count": 2}}
    # a line lost from both fails the check
    storage.delete_prefix(f"{QUARANTINES[TpcdsTable.WEB_SALES].prefix}/")
    storage.delete_prefix(f"{TPCDS_QUARANTINE.prefix}/")
    assert not evaluate_rows_match_raw(storage, engine).passed


def test_rerunning_a_partition_replaces_exactly_that_partition(
    storage: LakeStorage, catalog: LakeCatalog, spark: SparkSession
) -> None:
    oracle = generated(SCALE)
    days = sold_dates(oracle)[:3] + [None]
    land_facts(storage, oracle, days)
    load_fact_days(storage, spark, days, "run-1")
    before = fact_rows(catalog)
    middle = date_sk(days[1])
    others_before = [r for r in before if r[0] != middle]
    assert len(others_before) < len(before)

    # the day's object is re-delivered with one row less and one price changed
    key = fact_key(days[1])
    lines = storage.get_bytes(key)[0].decode().splitlines()
    fields = lines[0].split("|")
    fields[21] = "1.23"
    storage.put_bytes(key, ("\n".join(["|".join(fields)] + lines[2:]) + "\n").encode())
    assert pending_fact_days(storage, Ledger(storage)) == [days[1]]

    load_fact_days(storage, spark, [days[1]], "run-2")

    after = fact_rows(catalog)
    assert [r for r in after if r[0] != middle] == others_before
    day_rows = [r for r in after if r[0] == middle]
    assert len(day_rows) == len(lines) - 1
    assert Decimal("1.23") in [r[21] for r in day_rows]

    # a day whose every line is bad would leave its partition empty: it is held (the snapshot
    # guard); approved, it empties the day, the others untouched
    storage.put_bytes(key, b"garbage\n")
    report = load_fact_days(storage, spark, [days[1]], "run-3")
    assert [(f.status, f.rows_quarantined) for f in report.files] == [(HELD, 1)]
    assert report.files[0].detail.startswith(f"empty: the snapshot has no rows and would delete every row of the day "
                                             f"{days[1]}")
    assert fact_rows(catalog) == after and pending_fact_days(storage, Ledger(storage)) == []
    approve(Ledger(storage), held_objects(storage), None, "approve")
    load_fact_days(storage, spark, pending_fact_days(storage, Ledger(storage)), "run-4")
    after = fact_rows(catalog)
    assert [r for r in after if r[0] != middle] == others_before
    assert [r for r in after if r[0] == middle] == []


def test_dimension_snapshots_upsert_on_the_surrogate_key(
    storage: LakeStorage, catalog: LakeCatalog, spark: SparkSession
) -> None:
    oracle = generated(SCALE)
    land_dimensions(storage, oracle)
    load_dimension(storage, spark, TpcdsTable.ITEM, "run-1")
    key = "raw/tpcds/item/item.dat"
    lines = storage.get_bytes(key)[0].decode().splitlines()
    first = lines[0].split("|")
    first[4] = "changed description"
    new_item = list(first)
    new_item[0] = "999999"
    # a new snapshot: item 1 changed (twice: the last line wins), a new item, item 2 absent
    storage.put_bytes(key, ("\n".join([lines[0], "|".join(first), "|".join(new_item)] + lines[2:]) + "\n").encode())
    report = load_dimension(storage, spark, TpcdsTable.ITEM, "run-2")

    con = duckdb.connect()
    catalog.attach_duckdb(con)
    rows = dict(con.sql("SELECT i_item_sk, i_item_desc FROM lake.tpcds.item").fetchall())
    assert len(rows) == len(lines) + 1  # upsert: the absent item 2 stays
    assert rows[int(first[0])] == "changed description"
    assert rows[999999] == "changed description"
    entry = report.files[0]
    assert (entry.rows_in_file, entry.rows_applied, entry.rows_superseded) == (len(lines) + 1, len(lines), 1)


def test_a_fact_table_created_before_merge_on_read_gets_it(storage: LakeStorage, catalog: LakeCatalog) -> None:
    """`web_sales` is merge-on-read (a correction writes position deletes, not every file again):
    a table created without the property gets it when a load next ensures the table."""
    from lake_assets.tpcds.load import MERGE_ON_READ, ensure_table, iceberg_schema

    client = storage.catalog().pyiceberg()
    client.create_namespace_if_not_exists("tpcds")
    client.create_table(("tpcds", TpcdsTable.WEB_SALES), schema=iceberg_schema(TpcdsTable.WEB_SALES),
                        properties={"format-version": "2"})
    ensure_table(storage, TpcdsTable.WEB_SALES)
    properties = client.load_table(("tpcds", TpcdsTable.WEB_SALES)).properties
    assert MERGE_ON_READ.items() <= properties.items()
    ensure_table(storage, TpcdsTable.DATE_DIM)  # the dimensions stay copy-on-write (small, rewritten whole)
    assert "write.merge.mode" not in client.load_table(("tpcds", TpcdsTable.DATE_DIM)).properties
