"""The lake's tables by name: format, domain, where each lives and what it holds.

`lake query`, `lake history` and the checks resolve table names through this registry and
dispatch on `format`: Delta tables live under a key prefix of the lake bucket; Iceberg
tables live in the REST catalog under their own name (`tpcds.web_sales`), their files in
the catalog's table bucket.

A table's registry name (`tpcds.web_sales`) is what the ledger records and users type. The
pipeline's own Spark SQL names an Iceberg table in its catalog (`LakeTable.engine_name`,
`lake.tpcds.web_sales`), which resolves on every engine: on Sail the catalog is the default
one, on JVM Spark it is a catalog beside Delta's `spark_catalog`. Delta tables are named by
path (``delta.`s3://...` ``).
"""

from dataclasses import dataclass
from enum import StrEnum

from lake_assets.core.errors import UsageError
from lake_assets.resources.storage import LakeStorage


#: The Iceberg REST catalog's name in every engine session and DuckDB connection (`ATTACH ... AS lake`).
ICEBERG_CATALOG = "lake"


class TableFormat(StrEnum):
    DELTA = "delta"
    ICEBERG = "iceberg"


class Domain(StrEnum):
    INSURANCE = "insurance"
    TPCDS = "tpcds"
    LAKE = "lake"  # the lake's own bookkeeping (ledger)


@dataclass(frozen=True)
class LakeTable:
    name: str
    prefix: str  # Delta: key prefix of the table in the bucket; Iceberg: "" (the catalog places it)
    description: str
    format: TableFormat = TableFormat.DELTA
    domain: Domain = Domain.INSURANCE
    #: The write lock (core/lock.py) of the run that writes this table, when another table's
    #: run writes it too; empty: the table's own name (the ledger's: delta-rs's optimistic
    #: appends retry on conflict). Maintenance and restore take it.
    written_under: str = ""
    #: The tables this one is derived from (a history, change feed, quarantine, tombstones,
    #: report): it goes back with them when one is restored (or is rebuilt from them), never alone.
    derived_from: tuple[str, ...] = ()

    @property
    def write_lock(self) -> str:
        return self.written_under or self.name

    def uri(self, storage: LakeStorage) -> str:
        if self.format is not TableFormat.DELTA:
            raise TypeError(f"{self.name} is an {self.format} table in the catalog; it has no path URI")
        return storage.uri(self.prefix)

    @property
    def engine_name(self) -> str:
        """An Iceberg table's name in the pipeline's Spark SQL, qualified in its catalog (`lake.tpcds.web_sales`)."""
        if self.format is not TableFormat.ICEBERG:
            raise TypeError(f"{self.name} is a {self.format} table: the engine reads it by path (uri)")
        return f"{ICEBERG_CATALOG}.{self.name}"

    @property
    def identifier(self) -> tuple[str, str]:
        """(namespace, table) of an Iceberg table in the catalog."""
        namespace, _, name = self.name.partition(".")
        return namespace, name


INSURANCE = LakeTable("insurance", "curated/insurance", "curated insurance policies (full load + CDC)")
INSURANCE_QUARANTINE = LakeTable(
    "insurance_quarantine", "curated/insurance_quarantine", "raw rows that could not be applied, with the reason",
    written_under="insurance", derived_from=("insurance",),
)
INSURANCE_TOMBSTONES = LakeTable(
    "insurance_tombstones", "curated/insurance_tombstones",
    "deleted policy keys and the sequence of their delete, kept for the retention window",
    written_under="insurance", derived_from=("insurance",),
)
INSURANCE_CHANGES = LakeTable(
    "insurance_changes", "curated/insurance_changes",
    "change feed of insurance: one row per insert, update pre/post image or delete, per table version "
    "(_change_type, _commit_version, _commit_timestamp), derived from the Delta log",
    written_under="insurance", derived_from=("insurance",),
)
INSURANCE_HISTORY = LakeTable(
    "insurance_history", "curated/insurance_history",
    "SCD type 2 history of insurance on the source sequence: one row per policy version, _sequence to "
    "valid_to_sequence (valid_from/valid_to their times), deletes as _operation D rows, is_current",
    written_under="insurance", derived_from=("insurance",),
)
LEDGER = LakeTable("lake_ledger", "curated/_lake/ledger", "which raw objects were applied or rejected, by which run",
                   domain=Domain.LAKE)


def _tpcds(name: str, description: str, derived_from: tuple[str, ...] = ()) -> LakeTable:
    return LakeTable(f"tpcds.{name}", "", description, TableFormat.ICEBERG, Domain.TPCDS, derived_from=derived_from)


TPCDS_WEB_SALES = _tpcds("web_sales", "TPC-DS web_sales fact table, partitioned by sold date")
TPCDS_DATE_DIM = _tpcds("date_dim", "TPC-DS date dimension (upserted on d_date_sk)")
TPCDS_TIME_DIM = _tpcds("time_dim", "TPC-DS time-of-day dimension (upserted on t_time_sk)")
TPCDS_CUSTOMER = _tpcds("customer", "TPC-DS customer dimension (upserted on c_customer_sk)")
TPCDS_ITEM = _tpcds("item", "TPC-DS item dimension (upserted on i_item_sk)")
#: The star: the tables the raw objects load (the fact first).
TPCDS_STAR = (TPCDS_WEB_SALES, TPCDS_DATE_DIM, TPCDS_TIME_DIM, TPCDS_CUSTOMER, TPCDS_ITEM)
#: Delta, like insurance_quarantine: one quarantine schema and writer for every domain
#: (core/quarantine.py), readable by delta-rs in checks without the engine or the catalog.
TPCDS_QUARANTINE = LakeTable("tpcds_quarantine", "curated/tpcds_quarantine",
                             "raw TPC-DS rows that could not be applied, with the reason", domain=Domain.TPCDS,
                             derived_from=tuple(t.name for t in TPCDS_STAR))
#: Delta too, beside the quarantine: a small table upserted per key, read whole by every load.
TPCDS_TOMBSTONES = LakeTable("tpcds_tombstones", "curated/tpcds_tombstones",
                             "deleted web_sales keys and the sequence of their delete (kept: a day can be "
                             "re-loaded any time)", domain=Domain.TPCDS, derived_from=(TPCDS_WEB_SALES.name,))

#: The business zone: one Iceberg table per report SQL file in tpcds/reports/ (a test keeps them in step),
#: rebuilt from the star after its loads and restores.
TPCDS_REPORTS = tuple(_tpcds(f"report_{name}", f"BI report {name}, recomputed from the star (tpcds/reports/{name}.sql)",
                             tuple(t.name for t in TPCDS_STAR))
                      for name in ("q12", "q41", "q86", "q92", "sales_by_hour", "top_customers"))

TABLES: dict[str, LakeTable] = {t.name: t for t in (
    INSURANCE, INSURANCE_QUARANTINE, INSURANCE_TOMBSTONES, INSURANCE_CHANGES, INSURANCE_HISTORY, LEDGER,
    *TPCDS_STAR, TPCDS_QUARANTINE, TPCDS_TOMBSTONES,
    *TPCDS_REPORTS,
)}


class UnknownTable(UsageError):
    """A table name that is not in the registry."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown table {name!r}; known tables: {', '.join(sorted(TABLES))}")


def table(name: str) -> LakeTable:
    try:
        return TABLES[name]
    except KeyError:
        raise UnknownTable(name) from None


class TableNotBuilt(UsageError):
    """A registered table that has not been written yet; the message says what builds it."""

    def __init__(self, name: str) -> None:
        if TABLES.get(name) in TPCDS_REPORTS:
            super().__init__(f"table {name} does not exist yet: reports are built from the TPC-DS star after it "
                             "loads (`lake dev` refreshes them after each load; `lake run` loads and refreshes now)")
        else:
            super().__init__(f"table {name} does not exist yet (nothing applied); see `lake status`")
