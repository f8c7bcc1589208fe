"""The star's five tables as their files declare them (`lake_assets/tables/tpcds/`), applied by the
change core (in a namespace of the test's), give the star's own tables, reading the star's raw objects
where the generator lands them: a first load of every day and dimension, a batch of corrections,
a day delivered again without one of its lines and with one changed (after corrections of its
keys), a dimension export with a row changed and one gone. pyiceberg reads both sets of tables (a
reader that is neither loader's engine); DuckDB's dsdgen is the oracle of the first load."""

import uuid
from collections import Counter
from pathlib import Path

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.apply.run import apply_pending
from lake_assets.core.registry import star_declarations
from lake_assets.core.tables import table
from lake_assets.core.formats.delta import open_table as open_delta
from lake_assets.core.ledger import APPLIED
from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.embedded_s3 import EmbeddedS3
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.correction_batch import land_corrections
from lake_assets.tpcds.corrections import apply_corrections
from lake_assets.tpcds.load import load_dimension, load_fact_days
from lake_assets.tpcds.raw_contract import STAR_TABLES
from lake_assets.tpcds.schema import COLUMNS, KEYS, RAW, TOMBSTONES, TpcdsTable, ledger_name
from lake_assets_tests.conftest import make_storage
from lake_assets_tests.helpers.iceberg import drop_namespace_tables
from lake_assets_tests.helpers.tpcds import (
    delimited,
    fact_key,
    generated,
    land_dimensions,
    land_facts,
    load_star,
    sold_dates,
    star_declaration,
)

SCALE = 0.01
NAMES = [c for c, _ in COLUMNS[TpcdsTable.WEB_SALES]]
QUANTITY = NAMES.index("ws_quantity")


def _rows(catalog: LakeCatalog, identifier: str, table: str) -> Counter:
    """The table's rows (the star's columns), read by pyiceberg."""
    names = [c for c, _ in COLUMNS[table]]
    arrow = catalog.pyiceberg().load_table(identifier).scan(selected_fields=tuple(names)).to_arrow()
    return Counter(zip(*(arrow.column(n).to_pylist() for n in names)))


def _keys(rows: Counter, table: str) -> set[tuple]:
    where = [[c for c, _ in COLUMNS[table]].index(k) for k in KEYS[table]]
    return {tuple(row[i] for i in where) for row in rows}


def test_the_star_declared_on_the_core_gives_the_star_tables(storage: LakeStorage, catalog: LakeCatalog,
                                                             spark: SparkSession) -> None:
    con = generated(SCALE)
    land_dimensions(storage, con)
    land_facts(storage, con)
    group = f"star_{uuid.uuid4().hex[:6]}"
    declared = [star_declaration(table, group) for table in STAR_TABLES]

    def core(run_id: str) -> None:
        for table in declared:
            for entry in apply_pending(table, storage, spark, run_id).files:  # every line accounted for
                assert entry.status == APPLIED and entry.rows_in_file == \
                    entry.rows_applied + entry.rows_superseded + entry.rows_quarantined, entry

    def same() -> dict[str, Counter]:
        tables = {table: _rows(catalog, copy.table_name, table) for table, copy in zip(STAR_TABLES, declared)}
        for table in STAR_TABLES:
            assert tables[table] == _rows(catalog, ledger_name(table), table), table
        return tables

    try:
        load_star(storage, spark)
        core("core-1")
        first = same()
        for table in STAR_TABLES:  # both are dsdgen's tables (an empty text is an empty field: NULL)
            names = ", ".join(f"nullif({c}, '')" if t == "STRING" else c for c, t in COLUMNS[table])
            assert first[table] == Counter(con.sql(f"SELECT {names} FROM {table}").fetchall()), table

        land_corrections(storage, 60, seed=3)
        apply_corrections(storage, spark, "star-2")
        core("core-2")
        corrected = same()[TpcdsTable.WEB_SALES]
        assert corrected != first[TpcdsTable.WEB_SALES]

        # a day delivered again, newer than the corrections: one line fewer, one quantity changed
        day = sold_dates(con)[3]
        lines = storage.get_bytes(fact_key(day))[0].decode().splitlines()
        dropped, changed = lines[0].split("|"), lines[1].split("|")
        changed[QUANTITY] = "4242"
        storage.put_bytes(fact_key(day), "".join(f"{line}\n" for line in ["|".join(changed), *lines[2:]]).encode())
        load_fact_days(storage, spark, [day], "star-3")
        core("core-3")
        redelivered = same()[TpcdsTable.WEB_SALES]
        assert tuple(int(dropped[NAMES.index(k)]) for k in KEYS[TpcdsTable.WEB_SALES]) \
            not in _keys(redelivered, TpcdsTable.WEB_SALES)
        assert any(row[QUANTITY] == 4242 for row in redelivered)

        # a new item export: one price changed, one item gone (the star's upsert keeps it)
        export = delimited(con, f"SELECT {', '.join(c for c, _ in COLUMNS[TpcdsTable.ITEM])} FROM ("
                                "SELECT * REPLACE (i_current_price + 1 AS i_current_price) FROM item "
                                "WHERE i_item_sk = 1 UNION ALL SELECT * FROM item WHERE i_item_sk > 2)")
        storage.put_bytes(RAW.dimension_key(TpcdsTable.ITEM), export)
        load_dimension(storage, spark, TpcdsTable.ITEM, "star-4")
        core("core-4")
        items = same()[TpcdsTable.ITEM]
        assert items != first[TpcdsTable.ITEM] and (2,) in _keys(items, TpcdsTable.ITEM)
    finally:
        drop_namespace_tables(catalog, group)


def test_the_core_takes_over_a_dimension_the_stars_loader_built(storage: LakeStorage, catalog: LakeCatalog,
                                                                spark: SparkSession) -> None:
    """A lake whose `item` the star's own loader built, before the dimensions moved to the change core:
    the loader's table (the TPC-DS columns, no audit columns), its rows and its ledger entry under
    `tpcds.item`. The core applies nothing again; the next export is upserted into the same table,
    which gains the audit columns (the loader's rows read them NULL: older than any change)."""
    import datetime as dt

    import pyarrow as pa

    from lake_assets.core.ledger import Ledger, LedgerEntry
    from lake_assets.tpcds.load import ensure_table

    con = generated(SCALE)
    land_dimensions(storage, con)
    key = RAW.dimension_key(TpcdsTable.ITEM)
    ensure_table(storage, TpcdsTable.ITEM)  # as the loader created it
    built = catalog.pyiceberg().load_table(ledger_name(TpcdsTable.ITEM))
    names = [c for c, _ in COLUMNS[TpcdsTable.ITEM]]
    selected = ", ".join(f"nullif({c}, '')" if t == "STRING" else c for c, t in COLUMNS[TpcdsTable.ITEM])
    dsdgen = con.sql(f"SELECT {selected} FROM item").fetch_arrow_table()  # an empty text is NULL, as loaded
    built.append(pa.Table.from_arrays(dsdgen.columns, names=names).cast(built.schema().as_arrow()))
    [landed] = storage.list_objects(key)
    Ledger(storage).record([LedgerEntry(
        ledger_name(TpcdsTable.ITEM), key, landed["ETag"].strip('"'), landed["Size"], "fullload", APPLIED,
        dsdgen.num_rows, dsdgen.num_rows, 0, 0, built.refresh().current_snapshot().snapshot_id, "star-loader",
        dt.datetime.now(dt.timezone.utc))])
    loaded = _rows(catalog, ledger_name(TpcdsTable.ITEM), TpcdsTable.ITEM)
    item = star_declarations()[TpcdsTable.ITEM]
    assert apply_pending(item, storage, spark, "core-1").files == []  # applied by the loader: not again

    export = delimited(con, f"SELECT {', '.join(names)} FROM ("
                            "SELECT * REPLACE (i_current_price + 1 AS i_current_price) FROM item "
                            "WHERE i_item_sk = 1 UNION ALL SELECT * FROM item WHERE i_item_sk > 2)")
    storage.put_bytes(key, export + b"not-a-key|x|\n")
    (entry,) = apply_pending(item, storage, spark, "core-2").files
    assert entry.status == APPLIED and entry.rows_quarantined == 1
    assert entry.rows_in_file == entry.rows_applied + entry.rows_superseded + entry.rows_quarantined
    # the bad line in the dimension's own quarantine, a lake table (`lake query "... FROM item_quarantine"`)
    quarantine = table("item_quarantine")
    rejected = DeltaTable(quarantine.uri(storage), storage_options=storage.delta_storage_options()).to_pyarrow_table()
    assert [(r["source_file"], r["raw_text"]) for r in rejected.to_pylist()] == [(key, "not-a-key|x|")]
    items = _rows(catalog, ledger_name(TpcdsTable.ITEM), TpcdsTable.ITEM)
    assert len(items) == len(loaded) and (2,) in _keys(items, TpcdsTable.ITEM)  # the star's upsert keeps item 2
    assert items != loaded
    # the core's audit columns added to the loader's table: the loader's rows read NULL, the core's its own
    audit = ["_operation", "_source_file", "_source_line", "_applied_at", "_sequence"]
    rows = catalog.pyiceberg().load_table(ledger_name(TpcdsTable.ITEM)).scan(
        selected_fields=("i_item_sk", *audit)).to_arrow().to_pylist()
    changed = {r["i_item_sk"] for r in rows if r["_sequence"] is not None}
    assert 1 in changed and 2 not in changed and all(r["_source_file"] == key for r in rows if r["i_item_sk"] in changed)
    assert [e["run_id"] for e in Ledger(storage).entries(ledger_name(TpcdsTable.ITEM)).to_pylist()] == \
        ["star-loader", "core-2"]


def test_the_core_takes_over_web_sales_the_stars_loader_built(s3_server: EmbeddedS3, lake_home: Path,
                                                              storage: LakeStorage, catalog: LakeCatalog,
                                                              spark: SparkSession) -> None:
    """A lake whose `web_sales` the star's own loader built: twelve days, a batch of corrections, their
    ledger entries under `tpcds.web_sales`, the tombstone of a correction's delete. The change core
    applies none of it again; then a day delivered again (a line fewer, one quantity changed), a new
    day, a second batch of corrections and a late update of the deleted key (older than its delete:
    superseded), which the core applies into the same table. The oracle is
    the star's loader alone, given the same objects in the same order, in a lake of its own (another
    bucket, loaded first: the catalog is the session's)."""
    con = generated(SCALE)
    days = sold_dates(con)[:13]
    oracle = make_storage(s3_server.endpoint, lake_home, f"t-{uuid.uuid4().hex[:12]}")
    try:
        spark_oracle = SparkEngine().session(oracle)
        land_facts(oracle, con, days[:12])
        land_corrections(oracle, 25, seed=5)
        doomed = oracle.get_bytes(fact_key(days[3]))[0].decode().splitlines()[0]
        oracle.put_bytes(f"{RAW.corrections}20240102-000000000.dat", f"D|{doomed}\n".encode())
        first = [(o["Key"], oracle.get_bytes(o["Key"])[0]) for o in oracle.list_objects(RAW.root)]
        load_fact_days(oracle, spark_oracle, days[:12], "star-1")
        apply_corrections(oracle, spark_oracle, "star-1c")

        lines = oracle.get_bytes(fact_key(days[1]))[0].decode().splitlines()
        changed = lines[1].split("|")
        changed[QUANTITY] = "4242"
        again = "".join(f"{line}\n" for line in ["|".join(changed), *lines[2:]]).encode()
        oracle.put_bytes(fact_key(days[1]), again)
        land_facts(oracle, con, days[12:])
        land_corrections(oracle, 25, seed=6)
        late = doomed.split("|")
        late[QUANTITY] = "777"
        oracle.put_bytes(f"{RAW.corrections}20240101-000000000.dat", ("U|" + "|".join(late) + "\n").encode())
        seen = {key for key, _ in first}
        second = [(o["Key"], oracle.get_bytes(o["Key"])[0]) for o in oracle.list_objects(RAW.root)
                  if o["Key"] not in seen or o["Key"] == fact_key(days[1])]
        load_fact_days(oracle, spark_oracle, [days[1], days[12]], "star-2")
        apply_corrections(oracle, spark_oracle, "star-2c")
        expected = _rows(oracle.catalog(), ledger_name(TpcdsTable.WEB_SALES), TpcdsTable.WEB_SALES)
        gone = tuple(int(late[NAMES.index(k)]) for k in KEYS[TpcdsTable.WEB_SALES])
        assert gone not in _keys(expected, TpcdsTable.WEB_SALES)  # the late update: superseded by the delete
        drop_namespace_tables(oracle.catalog(), "tpcds")
    finally:
        oracle.delete_prefix("")
        oracle.get_client().delete_bucket(Bucket=oracle.bucket)

    for key, body in first:
        storage.put_bytes(key, body)
    load_fact_days(storage, spark, days[:12], "star-1")
    apply_corrections(storage, spark, "star-1c")
    built = _rows(catalog, ledger_name(TpcdsTable.WEB_SALES), TpcdsTable.WEB_SALES)
    assert open_delta(storage, TOMBSTONES) is not None  # the loader's delete, which the core must know
    fact = star_declarations()[TpcdsTable.WEB_SALES]
    assert apply_pending(fact, storage, spark, "core-1").files == []  # applied by the loader: not again
    assert _rows(catalog, ledger_name(TpcdsTable.WEB_SALES), TpcdsTable.WEB_SALES) == built

    for key, body in second:
        storage.put_bytes(key, body)
    files = apply_pending(fact, storage, spark, "core-2").files
    assert sorted(e.source_file for e in files) == sorted(key for key, _ in second)
    assert [(e.rows_applied, e.rows_superseded) for e in files if e.source_file.endswith("20240101-000000000.dat")] \
        == [(0, 1)]
    for entry in files:  # every line accounted for
        assert entry.status == APPLIED and entry.rows_in_file == \
            entry.rows_applied + entry.rows_superseded + entry.rows_quarantined, entry
    assert _rows(catalog, ledger_name(TpcdsTable.WEB_SALES), TpcdsTable.WEB_SALES) == expected
