"""A source written otherwise than DMS's defaults, declared as such (`delimiter`, `suffix`): a
TPC-DS dimension as TPC-DS's generator writes it (`|`-separated `.dat`, no header, NULL as an
empty field, text with its trailing spaces: `trim: false`), applied by the change core on the
engine as a full load, then a CDC file of the same layout. DuckDB's dsdgen table, with the same
changes applied in SQL, is the oracle; delta-rs reads the lake's table."""

import datetime as dt
import uuid
from decimal import Decimal

import duckdb
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.apply.history import IS_CURRENT
from lake_assets.core.apply.run import apply_pending
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.ledger import APPLIED, Ledger
from lake_assets.core.registry import parse
from lake_assets.core.tables import table_set
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.schema import COLUMNS
from lake_assets_tests.helpers.tpcds import delimited, generated

SCALE = 0.01
ITEM = COLUMNS["item"]
NAMES = [name for name, _ in ITEM]
#: The changes, as SQL over dsdgen's `item`: three price updates, a delete, an insert.
CHANGES = ("SELECT 'U' AS op, * REPLACE (i_current_price + 1 AS i_current_price) FROM item WHERE i_item_sk <= 3 "
           "UNION ALL SELECT 'D', * FROM item WHERE i_item_sk = 5 "
           "UNION ALL SELECT 'I', * REPLACE (1000000 AS i_item_sk, 'new item' AS i_item_desc) FROM item "
           "WHERE i_item_sk = 7")


def _declaration() -> TableDeclaration:
    name = f"item_{uuid.uuid4().hex[:6]}"
    def options(column: str, kind: str) -> str:  # the key is never NULL; TPC-DS's text keeps its spaces
        return ", nullable: false" if column == "i_item_sk" else ", trim: false" if kind == "STRING" else ""

    columns = "\n".join(f"  - {{name: {column}, type: \"{kind}\"{options(column, kind)}}}" for column, kind in ITEM)
    return parse(f"""
name: {name}
group: dims
keys: [i_item_sk]
columns:
{columns}
sources:
  - {{prefix: raw/{name}/full/, kind: snapshot, delimiter: "|", suffix: .dat}}
  - {{prefix: raw/{name}/cdc/, kind: cdc, delimiter: "|", suffix: .dat}}
""", "test")


def _rows(storage: LakeStorage, uri: str, current_only: bool = False) -> list[tuple]:
    rows = DeltaTable(uri, storage_options=storage.delta_storage_options()).to_pyarrow_table().to_pylist()
    return sorted(tuple(r[n] for n in NAMES) for r in rows if not current_only or r[IS_CURRENT])


def _expected(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple]:
    return sorted(con.sql(f"SELECT {', '.join(NAMES)} FROM {table}").fetchall())


def test_a_tpcds_dimension_as_its_generator_writes_it_loads_and_takes_changes(storage: LakeStorage,
                                                                              spark: SparkSession) -> None:
    con = generated(SCALE)
    table = _declaration()
    tables = table_set(table)
    full, cdc = (s.prefix for s in table.sources)
    snapshot = delimited(con, "SELECT * FROM item")
    assert b"," in snapshot  # item descriptions hold commas: data, not field separators
    storage.put_bytes(f"{full}item.dat", snapshot)
    storage.put_bytes(f"{full}_SUCCESS", b"")  # beside the data, as Spark and DMS leave it: ignored
    storage.put_bytes(f"{full}item.csv", b"not,this,table's,layout\n")  # not the declared suffix: ignored
    first = apply_pending(table, storage, spark, "run-1")
    assert [f.source_file for f in first.files] == [f"{full}item.dat"]
    loaded = _rows(storage, tables.table.uri(storage))
    assert loaded == _expected(con, "item")
    assert any(value.endswith(" ") for row in loaded for value in row if isinstance(value, str))  # kept as written

    changes = delimited(con, CHANGES)
    storage.put_bytes(f"{cdc}20240402-100000000.dat", changes)
    second = apply_pending(table, storage, spark, "run-2")
    oracle = duckdb.connect()
    oracle.register("dsdgen_item", con.sql("SELECT * FROM item").arrow())
    oracle.execute("CREATE TABLE item AS SELECT * FROM dsdgen_item")
    oracle.execute("UPDATE item SET i_current_price = i_current_price + 1 WHERE i_item_sk <= 3")
    oracle.execute("DELETE FROM item WHERE i_item_sk = 5")
    oracle.execute("INSERT INTO item SELECT * REPLACE (1000000 AS i_item_sk, 'new item' AS i_item_desc) "
                   "FROM item WHERE i_item_sk = 7")
    assert _rows(storage, tables.table.uri(storage)) == _expected(oracle, "item")
    price = {r[0]: r[NAMES.index("i_current_price")] for r in _rows(storage, tables.table.uri(storage))}
    assert isinstance(price[1], Decimal) and isinstance(_rows(storage, tables.table.uri(storage))[0][2], dt.date)

    # the SCD2 history's current rows are the table; items 1-3 have a closed version each
    history = _rows(storage, tables.history.uri(storage))
    assert _rows(storage, tables.history.uri(storage), current_only=True) == _expected(oracle, "item")
    assert len(history) == len(_expected(con, "item")) + 3 + 1 + 1  # + the updates, the delete row, the insert

    # every record accounted for, in the ledger: applied, nothing quarantined
    (cdc_entry,) = second.files
    assert (cdc_entry.status, cdc_entry.rows_in_file, cdc_entry.rows_applied, cdc_entry.rows_quarantined) == \
        (APPLIED, changes.count(b"\n"), 5, 0)
    entries = Ledger(storage).latest(table.name)
    assert sorted(key for key, _ in entries) == [f"{cdc}20240402-100000000.dat", f"{full}item.dat"]
    loaded = next(e for (key, _), e in entries.items() if key.endswith("item.dat"))
    assert (loaded["status"], loaded["rows_in_file"], loaded["rows_applied"]) == \
        (APPLIED, snapshot.count(b"\n"), snapshot.count(b"\n"))
