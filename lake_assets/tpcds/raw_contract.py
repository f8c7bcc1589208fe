"""Where and how TPC-DS data lands in the raw zone (the contract the loader reads).

- Delimited text as TPC-DS's own generator writes it: fields separated by `|`, no header,
  no trailing delimiter, NULL is an empty field, no quoting, `\\n` line ends. No value may
  contain `|`, `"` or a line break (the generator checks and refuses otherwise). Columns in
  the order DuckDB's `dsdgen` creates them.
- Dimension snapshots: `raw/tpcds/<table>/<table>.dat`.
- Facts: `raw/tpcds/web_sales/ws_sold_date=YYYY-MM-DD/part-00000.dat`, one folder per sold
  date; rows with a NULL `ws_sold_date_sk` under `ws_sold_date=__HIVE_DEFAULT_PARTITION__`.
- Corrections (CDC): `raw/tpcds/web_sales_cdc/YYYYMMDD-HHMMSSfff.dat`, the operation
  (`I`, `U`, `D`) first, then every `web_sales` column; keyed on (ws_item_sk, ws_order_number).
"""

import datetime as dt

RAW_PREFIX = "raw/tpcds/"
FACT = "web_sales"
DIMENSIONS = ("date_dim", "time_dim", "customer", "item")
STAR_TABLES = (FACT, *DIMENSIONS)
FACT_PREFIX = f"{RAW_PREFIX}{FACT}/"
CDC_PREFIX = f"{RAW_PREFIX}web_sales_cdc/"
#: The name in each fact folder (`ws_sold_date=YYYY-MM-DD`): the sold date, not the table's
#: partition source column (`schema.PARTITION_COLUMN`, the date's surrogate key).
DAY_FOLDER_COLUMN = "ws_sold_date"
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
FACT_KEY = ("ws_item_sk", "ws_order_number")
DELIMITER = "|"
#: Characters no raw value may contain (they would break the unquoted `|` format).
FORBIDDEN = ("|", '"', "\n", "\r")
EXTENSION = ".dat"


def dimension_key(table: str) -> str:
    return f"{RAW_PREFIX}{table}/{table}{EXTENSION}"


def fact_folder(sold_date: dt.date | None) -> str:
    value = sold_date.isoformat() if sold_date else DEFAULT_PARTITION
    return f"{FACT_PREFIX}{DAY_FOLDER_COLUMN}={value}/"


def fact_key(sold_date: dt.date | None, part: int = 0) -> str:
    return f"{fact_folder(sold_date)}part-{part:05d}{EXTENSION}"


def cdc_key(at: dt.datetime) -> str:
    at = at.astimezone(dt.timezone.utc)
    return f"{CDC_PREFIX}{at:%Y%m%d-%H%M%S}{at.microsecond // 1000:03d}{EXTENSION}"
