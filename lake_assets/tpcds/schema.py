"""The TPC-DS star schema the `tpcds` domain loads: web_sales and four of its dimensions.

The star's tables are declared as any table is, one file each in `lake_assets/tables/tpcds/`
(`lake table list` shows them): their columns, types, descriptions, keys and the fact's
partitioning are read from there (`DECLARATIONS`); this module gives the loader their shapes.

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

from lake_assets.core.declaration import DailyPartitions, DeclarationError, TableDeclaration
from lake_assets.core.partition_fields import partition_field
from lake_assets.core.registry import star_declarations
from lake_assets.core.tables import ICEBERG_CATALOG, TPCDS_QUARANTINE, TPCDS_TOMBSTONES, LakeTable, table_set
from lake_assets.tpcds import raw_contract
from lake_assets.tpcds.raw_contract import date_sk, sk_date  # noqa: F401  (the star's names for them)


class TpcdsTable(StrEnum):
    WEB_SALES = "web_sales"
    DATE_DIM = "date_dim"
    TIME_DIM = "time_dim"
    CUSTOMER = "customer"
    ITEM = "item"


#: The star's tables declared as any table is, one file each next to the code location
#: (`lake_assets/tables/tpcds/<table>.yaml`): their columns, descriptions, keys and partitioning.
DECLARATIONS: dict[str, TableDeclaration] = {table: star_declarations()[table] for table in TpcdsTable}

#: Each table's quarantine, as the change core keeps every declared table's (`web_sales_quarantine`,
#: `item_quarantine`, ...): where its rejected lines go, with their reasons.
QUARANTINES: dict[str, LakeTable] = {table: table_set(declared).quarantine for table, declared in DECLARATIONS.items()}
#: Every quarantine of the star: each table's own, then the one earlier releases wrote for all of them.
ALL_QUARANTINES: tuple[LakeTable, ...] = (*QUARANTINES.values(), TPCDS_QUARANTINE)
#: web_sales' tombstones, as the change core keeps every declared table's (`web_sales_tombstones`);
#: the dimensions' are their own declared tables' (`item_tombstones`, ...).
TOMBSTONES: LakeTable = table_set(DECLARATIONS[TpcdsTable.WEB_SALES]).tombstones
#: web_sales' tombstones: its own, then those earlier releases kept per Iceberg table (`table_uuid`).
ALL_TOMBSTONES: tuple[LakeTable, ...] = (TOMBSTONES, TPCDS_TOMBSTONES)

#: (column, Spark SQL type) per table, in TPC-DS order.
COLUMNS: dict[str, list[tuple[str, str]]] = {table: [(c.name, c.type) for c in declared.columns]
                                             for table, declared in DECLARATIONS.items()}

#: The column every web_sales row carries besides TPC-DS's: the sequence of its change.
SEQUENCE = "_sequence"


def table_columns(table: str) -> list[tuple[str, str]]:
    """(column, Spark SQL type) of the Iceberg table: the raw columns, and `_sequence` for web_sales."""
    return [*COLUMNS[table], (SEQUENCE, "STRING")] if table == TpcdsTable.WEB_SALES else COLUMNS[table]


#: The key a row is identified by: the fact's (item, order) pair, each dimension's surrogate key.
KEYS: dict[str, tuple[str, ...]] = {table: declared.keys for table, declared in DECLARATIONS.items()}

DIMENSIONS = (TpcdsTable.DATE_DIM, TpcdsTable.TIME_DIM, TpcdsTable.CUSTOMER, TpcdsTable.ITEM)
NAMESPACE = "tpcds"
#: The fact's partition source column, and the width of its truncate transform (in days).
_FACT_PARTITION = partition_field(DECLARATIONS[TpcdsTable.WEB_SALES].partition_by[0])
PARTITION_COLUMN: str = _FACT_PARTITION.column
PARTITION_DAYS: int = _FACT_PARTITION.width or 1

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
def _calendar() -> tuple[DailyPartitions, dt.date]:
    daily = DECLARATIONS[TpcdsTable.WEB_SALES].daily_partitions
    if daily is None or daily.end is None:
        raise DeclarationError("lake_assets/tables/tpcds/web_sales.yaml: daily_partitions: the star's calendar "
                               "needs a start and an end")
    return daily, daily.end


CALENDAR, LAST_DAY = _calendar()
FIRST_DAY = CALENDAR.start


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
