"""`lake tpcds corrections N`: generate a realistic batch of late corrections to `web_sales`, as a CDC file.

Computed by DuckDB over the raw zone (the fact table never passes through Python):
- `U` (most): a line whose quantity or sales price was corrected; every derived amount is
  recomputed the TPC-DS way (extended prices = quantity x unit price, tax, coupon and
  shipping keep their rate per unit or per amount, net paid/profit follow), and stays a
  DECIMAL(7,2).
- `D`: cancelled orders, every line of each (whole orders while the budget allows).
- `I`: late lines of new orders (order numbers above any existing one), priced the same way.
Keys are unique within the batch, so the file needs no ordering to be applied. The pick is
deterministic for a given seed. Raw lines the loader would quarantine for not parsing are
not drawn from (raw_duckdb.py skips them).
"""

import datetime as dt
import tempfile
from dataclasses import dataclass
from pathlib import Path

import duckdb

from lake_assets.core.errors import LakeError, UsageError
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds import raw_contract as contract
from lake_assets.tpcds.generate import COPY_OPTIONS
from lake_assets.tpcds.raw_duckdb import dsdgen_columns, raw_connection

DELETE_SHARE = 0.10
INSERT_SHARE = 0.05
MAX_QUANTITY = 100

#: Recompute derived amounts from `q` (quantity) and unit prices, keeping the line's rates.
DERIVED = """
    SELECT *,
        CAST(q * (ws_list_price - new_sales_price) AS DECIMAL(7,2)) AS d_discount,
        CAST(q * new_sales_price AS DECIMAL(7,2)) AS d_sales,
        CAST(q * ws_wholesale_cost AS DECIMAL(7,2)) AS d_wholesale,
        CAST(q * ws_list_price AS DECIMAL(7,2)) AS d_list,
        CAST(round(q * new_sales_price * tax_rate, 2) AS DECIMAL(7,2)) AS d_tax,
        CAST(round(q * new_sales_price * coupon_rate, 2) AS DECIMAL(7,2)) AS d_coupon,
        CAST(round(q * ship_per_unit, 2) AS DECIMAL(7,2)) AS d_ship
    FROM ({base})
"""


@dataclass
class CorrectionsResult:
    key: str
    inserts: int
    updates: int
    deletes: int


def _rand(salt: str, seed: int) -> str:
    """A deterministic pseudo-random number in [0, 1) per fact row."""
    return f"((hash(ws_item_sk, ws_order_number, {seed}, '{salt}') % 1000000) / 1000000.0)"


PRICED = ("ws_quantity > 0 AND ws_sales_price IS NOT NULL AND ws_list_price IS NOT NULL "
          "AND ws_wholesale_cost IS NOT NULL AND ws_ext_sales_price IS NOT NULL AND ws_ext_tax IS NOT NULL "
          "AND ws_coupon_amt IS NOT NULL AND ws_ext_ship_cost IS NOT NULL "
          "AND ws_item_sk IS NOT NULL AND ws_order_number IS NOT NULL")
RATES = ("CASE WHEN ws_ext_sales_price = 0 THEN 0 ELSE ws_ext_tax / ws_ext_sales_price END AS tax_rate, "
         "CASE WHEN ws_ext_sales_price = 0 THEN 0 ELSE ws_coupon_amt / ws_ext_sales_price END AS coupon_rate, "
         "ws_ext_ship_cost / ws_quantity AS ship_per_unit")
#: web_sales columns a correction recomputes, as expressions over `DERIVED`'s columns.
RECOMPUTED = {
    "ws_quantity": "CAST(q AS BIGINT)", "ws_sales_price": "new_sales_price", "ws_ext_discount_amt": "d_discount",
    "ws_ext_sales_price": "d_sales", "ws_ext_wholesale_cost": "d_wholesale", "ws_ext_list_price": "d_list",
    "ws_ext_tax": "d_tax", "ws_coupon_amt": "d_coupon", "ws_ext_ship_cost": "d_ship",
    "ws_net_paid": "d_sales - d_coupon", "ws_net_paid_inc_tax": "d_sales - d_coupon + d_tax",
    "ws_net_paid_inc_ship": "d_sales - d_coupon + d_ship",
    "ws_net_paid_inc_ship_tax": "d_sales - d_coupon + d_ship + d_tax",
    "ws_net_profit": "d_sales - d_coupon - d_wholesale",
}


def _priced_rows(op: str, base: str) -> str:
    """`op` and every web_sales column of `base`'s rows, amounts recomputed from `q` and `new_sales_price`."""
    columns = []
    for name, kind in dsdgen_columns()[contract.FACT]:
        columns.append(f"CAST({RECOMPUTED[name]} AS {kind}) AS {name}" if name in RECOMPUTED else name)
    return f"SELECT '{op}' AS op, {', '.join(columns)} FROM ({DERIVED.format(base=base)})"


def build_batch(con: duckdb.DuckDBPyConnection, count: int, seed: int) -> int:
    """Create the temp table `batch` (op + web_sales columns) of `count` corrections (views `lake.tpcds.*` exist).

    Returns the number of web_sales rows the batch was drawn from.
    """
    column_list = ", ".join(name for name, _ in dsdgen_columns()[contract.FACT])
    con.execute("CREATE OR REPLACE TEMP TABLE facts AS SELECT * FROM lake.tpcds.web_sales")  # one read of the raw zone
    fact_rows = con.execute("SELECT count(*) FROM facts").fetchone()[0]
    if count > fact_rows // 2:
        raise UsageError(f"{count} corrections is more than half of web_sales ({fact_rows} rows); "
                         "generate a larger scale first")
    inserts = int(count * INSERT_SHARE)
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE cancelled AS
        WITH orders AS (
            SELECT ws_order_number, count(*) AS lines, min({_rand('order', seed)}) AS r
            FROM facts WHERE ws_order_number IS NOT NULL AND ws_item_sk IS NOT NULL
            GROUP BY ws_order_number),
        fitting AS (SELECT * FROM orders WHERE lines <= {int(count * DELETE_SHARE)}),
        picked AS (
            SELECT ws_order_number FROM (
                SELECT ws_order_number, sum(lines) OVER (ORDER BY r, ws_order_number) AS running FROM fitting)
            WHERE running <= {int(count * DELETE_SHARE)})
        SELECT {column_list} FROM facts
        WHERE ws_item_sk IS NOT NULL AND ws_order_number IN (SELECT ws_order_number FROM picked)""")
    updates = count - inserts - con.execute("SELECT count(*) FROM cancelled").fetchone()[0]
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE updated AS
        SELECT {column_list}, {RATES},
            1 + CAST(floor({_rand('dq', seed)} * 5) AS INT) AS dq,
            {_rand('kind', seed)} < 0.6 AS quantity_change
        FROM facts
        WHERE {PRICED} AND ws_order_number NOT IN (SELECT ws_order_number FROM cancelled)
        ORDER BY {_rand('update', seed)}, ws_order_number, ws_item_sk
        LIMIT {updates}""")
    update_base = f"""
        SELECT *,
            CASE WHEN NOT quantity_change THEN ws_quantity
                 WHEN {_rand('sign', seed)} < 0.5 AND ws_quantity - dq >= 1 THEN ws_quantity - dq
                 WHEN ws_quantity + dq <= {MAX_QUANTITY} THEN ws_quantity + dq
                 ELSE ws_quantity - dq END AS q,
            CASE WHEN quantity_change THEN ws_sales_price
                 ELSE CAST(least(ws_list_price, round(ws_sales_price * (0.85 + 0.1 * {_rand('dp', seed)}), 2))
                           AS DECIMAL(7,2)) END AS new_sales_price
        FROM updated"""
    insert_base = f"""
        SELECT * REPLACE ((SELECT max(ws_order_number) FROM facts) + row_number() OVER
                              (ORDER BY {_rand('insert', seed)}, ws_order_number, ws_item_sk) AS ws_order_number),
            {RATES},
            1 + CAST(floor({_rand('iq', seed)} * {MAX_QUANTITY}) AS INT) AS q,
            ws_sales_price AS new_sales_price
        FROM facts
        WHERE {PRICED}
        ORDER BY {_rand('insert', seed)}, ws_order_number, ws_item_sk
        LIMIT {inserts}"""
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE batch AS
        SELECT 'D' AS op, {column_list} FROM cancelled
        UNION ALL ({_priced_rows('U', update_base)})
        UNION ALL ({_priced_rows('I', insert_base)})
        ORDER BY op, ws_order_number, ws_item_sk""")
    return fact_rows


def land_corrections(storage: LakeStorage, count: int, seed: int = 0,
                     at: dt.datetime | None = None) -> CorrectionsResult:
    """Compute `count` corrections against the raw web_sales and land them as one CDC object."""
    if count < 1:
        raise UsageError(f"the number of corrections must be at least 1, not {count}")
    at = at or dt.datetime.now(dt.timezone.utc)
    con = raw_connection(storage, corrections=True)  # earlier batches count: no double cancels or order numbers
    try:
        with tempfile.TemporaryDirectory(prefix="lake-cdc-") as tmp:
            path = Path(tmp) / "batch.dat"
            build_batch(con, count, seed)
            counts = dict(con.execute("SELECT op, count(*) FROM batch GROUP BY op").fetchall())
            con.execute(f"COPY batch TO '{path}' ({COPY_OPTIONS})")
            key = contract.cdc_key(at)
            storage.put_bytes(key, path.read_bytes())
    except duckdb.HTTPException as error:
        raise storage.unavailable(error) from error
    except duckdb.Error as error:  # one line, not DuckDB's page of hints
        raise LakeError(f"DuckDB could not compute the corrections from the raw zone: "
                        f"{str(error).strip().splitlines()[0]}") from error
    finally:
        con.close()
    return CorrectionsResult(key=key, inserts=counts.get("I", 0), updates=counts.get("U", 0),
                             deletes=counts.get("D", 0))
