"""The TPC-DS star schema the `tpcds` domain loads: web_sales and four of its dimensions.

Column order is TPC-DS's (as DuckDB's `dsdgen` creates the tables), and so is the field
order of every raw object. Types are the generator's: money stays DECIMAL(7,2), dates are
DATE, text is STRING (TPC-DS char/varchar), and every integer is BIGINT — DuckDB's
generator makes all keys and counts BIGINT (it gives `c_last_review_date_sk` INTEGER
alone; we keep every surrogate key BIGINT so joins never widen).

`web_sales` is partitioned by `truncate(ws_sold_date_sk, 365)`: blocks of 365 sold days
(about a year) of the Julian-day key, since the fact has no date column. One partition per
day made one small file per day and scans ~13x slower (measured in README); 30-day blocks
still left DuckDB's cold scan of the star 2x slower than 365-day ones (each file a few S3
round trips; benchmarks/tpcds_star.py), and maintenance compacts each block into one file.
A day is re-loaded by one MERGE that replaces exactly that day's rows (tpcds/load.py). A
table created with another width keeps it (the width is read from the table's spec).

Every web_sales row also carries `_sequence` (last, after the TPC-DS columns): the
sequence of the change that wrote it (core/sequence.py), which orders the day loads and
corrections of a key. It is not a raw field: raw objects hold the TPC-DS columns only.
"""

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

from lake_assets.core.tables import ICEBERG_CATALOG
from lake_assets.tpcds import raw_contract
from lake_assets.tpcds.raw_contract import date_sk, sk_date  # noqa: F401  (the star's names for them)


class TpcdsTable(StrEnum):
    WEB_SALES = "web_sales"
    DATE_DIM = "date_dim"
    TIME_DIM = "time_dim"
    CUSTOMER = "customer"
    ITEM = "item"


#: (column, Spark SQL type) per table, in TPC-DS order.
COLUMNS: dict[str, list[tuple[str, str]]] = {
    "web_sales": [
        ("ws_sold_date_sk", "BIGINT"), ("ws_sold_time_sk", "BIGINT"), ("ws_ship_date_sk", "BIGINT"),
        ("ws_item_sk", "BIGINT"), ("ws_bill_customer_sk", "BIGINT"), ("ws_bill_cdemo_sk", "BIGINT"),
        ("ws_bill_hdemo_sk", "BIGINT"), ("ws_bill_addr_sk", "BIGINT"), ("ws_ship_customer_sk", "BIGINT"),
        ("ws_ship_cdemo_sk", "BIGINT"), ("ws_ship_hdemo_sk", "BIGINT"), ("ws_ship_addr_sk", "BIGINT"),
        ("ws_web_page_sk", "BIGINT"), ("ws_web_site_sk", "BIGINT"), ("ws_ship_mode_sk", "BIGINT"),
        ("ws_warehouse_sk", "BIGINT"), ("ws_promo_sk", "BIGINT"), ("ws_order_number", "BIGINT"),
        ("ws_quantity", "BIGINT"), ("ws_wholesale_cost", "DECIMAL(7,2)"), ("ws_list_price", "DECIMAL(7,2)"),
        ("ws_sales_price", "DECIMAL(7,2)"), ("ws_ext_discount_amt", "DECIMAL(7,2)"),
        ("ws_ext_sales_price", "DECIMAL(7,2)"), ("ws_ext_wholesale_cost", "DECIMAL(7,2)"),
        ("ws_ext_list_price", "DECIMAL(7,2)"), ("ws_ext_tax", "DECIMAL(7,2)"),
        ("ws_coupon_amt", "DECIMAL(7,2)"), ("ws_ext_ship_cost", "DECIMAL(7,2)"),
        ("ws_net_paid", "DECIMAL(7,2)"), ("ws_net_paid_inc_tax", "DECIMAL(7,2)"),
        ("ws_net_paid_inc_ship", "DECIMAL(7,2)"), ("ws_net_paid_inc_ship_tax", "DECIMAL(7,2)"),
        ("ws_net_profit", "DECIMAL(7,2)"),
    ],
    "date_dim": [
        ("d_date_sk", "BIGINT"), ("d_date_id", "STRING"), ("d_date", "DATE"), ("d_month_seq", "BIGINT"),
        ("d_week_seq", "BIGINT"), ("d_quarter_seq", "BIGINT"), ("d_year", "BIGINT"), ("d_dow", "BIGINT"),
        ("d_moy", "BIGINT"), ("d_dom", "BIGINT"), ("d_qoy", "BIGINT"), ("d_fy_year", "BIGINT"),
        ("d_fy_quarter_seq", "BIGINT"), ("d_fy_week_seq", "BIGINT"), ("d_day_name", "STRING"),
        ("d_quarter_name", "STRING"), ("d_holiday", "STRING"), ("d_weekend", "STRING"),
        ("d_following_holiday", "STRING"), ("d_first_dom", "BIGINT"), ("d_last_dom", "BIGINT"),
        ("d_same_day_ly", "BIGINT"), ("d_same_day_lq", "BIGINT"), ("d_current_day", "STRING"),
        ("d_current_week", "STRING"), ("d_current_month", "STRING"), ("d_current_quarter", "STRING"),
        ("d_current_year", "STRING"),
    ],
    "time_dim": [
        ("t_time_sk", "BIGINT"), ("t_time_id", "STRING"), ("t_time", "BIGINT"), ("t_hour", "BIGINT"),
        ("t_minute", "BIGINT"), ("t_second", "BIGINT"), ("t_am_pm", "STRING"), ("t_shift", "STRING"),
        ("t_sub_shift", "STRING"), ("t_meal_time", "STRING"),
    ],
    "customer": [
        ("c_customer_sk", "BIGINT"), ("c_customer_id", "STRING"), ("c_current_cdemo_sk", "BIGINT"),
        ("c_current_hdemo_sk", "BIGINT"), ("c_current_addr_sk", "BIGINT"),
        ("c_first_shipto_date_sk", "BIGINT"), ("c_first_sales_date_sk", "BIGINT"),
        ("c_salutation", "STRING"), ("c_first_name", "STRING"), ("c_last_name", "STRING"),
        ("c_preferred_cust_flag", "STRING"), ("c_birth_day", "BIGINT"), ("c_birth_month", "BIGINT"),
        ("c_birth_year", "BIGINT"), ("c_birth_country", "STRING"), ("c_login", "STRING"),
        ("c_email_address", "STRING"), ("c_last_review_date_sk", "BIGINT"),
    ],
    "item": [
        ("i_item_sk", "BIGINT"), ("i_item_id", "STRING"), ("i_rec_start_date", "DATE"),
        ("i_rec_end_date", "DATE"), ("i_item_desc", "STRING"), ("i_current_price", "DECIMAL(7,2)"),
        ("i_wholesale_cost", "DECIMAL(7,2)"), ("i_brand_id", "BIGINT"), ("i_brand", "STRING"),
        ("i_class_id", "BIGINT"), ("i_class", "STRING"), ("i_category_id", "BIGINT"),
        ("i_category", "STRING"), ("i_manufact_id", "BIGINT"), ("i_manufact", "STRING"),
        ("i_size", "STRING"), ("i_formulation", "STRING"), ("i_color", "STRING"), ("i_units", "STRING"),
        ("i_container", "STRING"), ("i_manager_id", "BIGINT"), ("i_product_name", "STRING"),
    ],
}

#: The column every web_sales row carries besides TPC-DS's: the sequence of its change.
SEQUENCE = "_sequence"


def table_columns(table: str) -> list[tuple[str, str]]:
    """(column, Spark SQL type) of the Iceberg table: the raw columns, and `_sequence` for web_sales."""
    return [*COLUMNS[table], (SEQUENCE, "STRING")] if table == TpcdsTable.WEB_SALES else COLUMNS[table]


#: The key a row is identified by: the fact's (item, order) pair, each dimension's surrogate key.
KEYS: dict[str, tuple[str, ...]] = {
    TpcdsTable.WEB_SALES: ("ws_item_sk", "ws_order_number"),
    TpcdsTable.DATE_DIM: ("d_date_sk",),
    TpcdsTable.TIME_DIM: ("t_time_sk",),
    TpcdsTable.CUSTOMER: ("c_customer_sk",),
    TpcdsTable.ITEM: ("i_item_sk",),
}

DIMENSIONS = (TpcdsTable.DATE_DIM, TpcdsTable.TIME_DIM, TpcdsTable.CUSTOMER, TpcdsTable.ITEM)
NAMESPACE = "tpcds"
#: The fact's partition source column, and the width of its truncate transform (in days).
PARTITION_COLUMN = "ws_sold_date_sk"
PARTITION_DAYS = 365

#: The fact's foreign keys to the dimensions this domain loads: (fact column, dimension, its key).
FOREIGN_KEYS: list[tuple[str, str, str]] = [
    ("ws_sold_date_sk", TpcdsTable.DATE_DIM, "d_date_sk"),
    ("ws_ship_date_sk", TpcdsTable.DATE_DIM, "d_date_sk"),
    ("ws_sold_time_sk", TpcdsTable.TIME_DIM, "t_time_sk"),
    ("ws_item_sk", TpcdsTable.ITEM, "i_item_sk"),
    ("ws_bill_customer_sk", TpcdsTable.CUSTOMER, "c_customer_sk"),
    ("ws_ship_customer_sk", TpcdsTable.CUSTOMER, "c_customer_sk"),
]

#: The calendar of web_sales: the sold days it holds, one Dagster partition each. TPC-DS
#: generates 1998-01-02 .. 2003-01-02 at every scale, and the calendar is exactly that, so
#: the UI's partitions end where the data ends (with a year's margin, a full load looked 83 %
#: filled for ever). A day object dated outside it is refused by its layout (tpcds/layout.py).
FIRST_DAY, LAST_DAY = dt.date(1998, 1, 2), dt.date(2003, 1, 2)


def ledger_name(table: str) -> str:
    """The table's name in the lake's registry and ledger (core/tables.py), as users type it: `tpcds.web_sales`."""
    return f"{NAMESPACE}.{table}"


def engine_name(table: str) -> str:
    """The table's name in the pipeline's Spark SQL, qualified in the Iceberg catalog: `lake.tpcds.web_sales`
    (resolves on Sail and on JVM Spark alike; see core/tables.py)."""
    return f"{ICEBERG_CATALOG}.{ledger_name(table)}"


@dataclass(frozen=True)
class RawLayout:
    """Where the raw zone holds each table's objects, as the loader reads them.

    Every name comes from the generator's contract (`raw_contract`), the one description.
    """

    root: str = raw_contract.RAW_PREFIX

    def dimension_key(self, table: str) -> str:
        return raw_contract.dimension_key(table)

    @property
    def facts(self) -> str:
        return raw_contract.FACT_PREFIX

    @property
    def corrections(self) -> str:
        return raw_contract.CDC_PREFIX

    def table_of(self, key: str) -> str | None:
        """The table an object under the raw root feeds (`tpcds.web_sales` for facts and corrections)."""
        folder = key[len(self.root):].split("/", 1)[0] if key.startswith(self.root) else ""
        if folder in (TpcdsTable.WEB_SALES, raw_contract.CDC_PREFIX[len(self.root):].rstrip("/")):
            return ledger_name(TpcdsTable.WEB_SALES)
        return ledger_name(folder) if folder in KEYS else None

    def fact_folder(self, day: dt.date | None) -> str:
        return raw_contract.fact_folder(day)


#: Hive's name for the partition of rows whose partition value is NULL.
NULL_PARTITION = raw_contract.DEFAULT_PARTITION
RAW = RawLayout()
