"""Where and how TPC-DS data lands in the raw zone (the contract the loader reads).

- Delimited text as TPC-DS's own generator writes it: fields separated by `|`, no header,
  no trailing delimiter, NULL is an empty field, no quoting, `\\n` line ends. No value may
  contain `|`, `"` or a line break (the generator checks and refuses otherwise). Columns in
  the order DuckDB's `dsdgen` creates them.
- Dimension snapshots: `raw/tpcds/<table>/<table>.dat`.
- Facts: `raw/tpcds/web_sales/ws_sold_date_sk=<key>/part-00000.dat`, one folder per sold
  date, named by the date's surrogate key as Hive and Spark name a partition of that column
  (`ws_sold_date_sk=2450816` is 1998-01-02); rows with a NULL `ws_sold_date_sk` under
  `ws_sold_date_sk=__HIVE_DEFAULT_PARTITION__`. Each object holds the column too.
- Corrections (CDC): `raw/tpcds/web_sales_cdc/YYYYMMDD-HHMMSSfff.dat`, the operation
  (`I`, `U`, `D`) first, then every `web_sales` column; keyed on (ws_item_sk, ws_order_number).
"""

import datetime as dt

from lake_assets.core.declaration import JULIAN_EPOCH

RAW_PREFIX = "raw/tpcds/"
FACT = "web_sales"
DIMENSIONS = ("date_dim", "time_dim", "customer", "item")
STAR_TABLES = (FACT, *DIMENSIONS)
FACT_PREFIX = f"{RAW_PREFIX}{FACT}/"
CDC_PREFIX = f"{RAW_PREFIX}web_sales_cdc/"
#: The column each fact folder names (`ws_sold_date_sk=<key>`): the sold date's surrogate key,
#: the column the table is partitioned by (`schema.PARTITION_COLUMN`).
DAY_FOLDER_COLUMN = "ws_sold_date_sk"
#: The column the folders named before (`ws_sold_date=YYYY-MM-DD`): objects there are refused with
#: the folder to move them to (tpcds/layout.py).
OLD_DAY_FOLDER_COLUMN = "ws_sold_date"
#: TPC-DS date surrogate keys are Julian day numbers: 1970-01-01 is 2440588 (`JULIAN_EPOCH`).
EPOCH = dt.date(1970, 1, 1)
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
FACT_KEY = ("ws_item_sk", "ws_order_number")
DELIMITER = "|"
#: Characters no raw value may contain (they would break the unquoted `|` format).
FORBIDDEN = ("|", '"', "\n", "\r")
EXTENSION = ".dat"


def dimension_key(table: str) -> str:
    return f"{RAW_PREFIX}{table}/{table}{EXTENSION}"


def date_sk(day: dt.date) -> int:
    return JULIAN_EPOCH + (day - EPOCH).days


def sk_date(sk: int) -> dt.date:
    return EPOCH + dt.timedelta(days=sk - JULIAN_EPOCH)


def day_folder_value(sold_date: dt.date | None) -> str:
    """The value a sold date's fact folder names: its surrogate key (Hive's NULL folder for None)."""
    return str(date_sk(sold_date)) if sold_date else DEFAULT_PARTITION


def fact_folder(sold_date: dt.date | None) -> str:
    return f"{FACT_PREFIX}{DAY_FOLDER_COLUMN}={day_folder_value(sold_date)}/"


def fact_key(sold_date: dt.date | None, part: int = 0) -> str:
    return f"{fact_folder(sold_date)}part-{part:05d}{EXTENSION}"


def cdc_key(at: dt.datetime) -> str:
    at = at.astimezone(dt.timezone.utc)
    return f"{CDC_PREFIX}{at:%Y%m%d-%H%M%S}{at.microsecond // 1000:03d}{EXTENSION}"
