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

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from lake_assets.core.errors import UsageError
from lake_assets.resources.storage import LakeStorage

if TYPE_CHECKING:
    from lake_assets.core.declaration import TableDeclaration


#: The Iceberg REST catalog's name in every engine session and DuckDB connection (`ATTACH ... AS lake`).
ICEBERG_CATALOG = "lake"


class TableFormat(StrEnum):
    DELTA = "delta"
    ICEBERG = "iceberg"


class Domain(StrEnum):
    """The domains of the lake's own tables; a declared table's domain is its declaration's group."""

    TPCDS = "tpcds"
    LAKE = "lake"  # the lake's own bookkeeping (ledger)


@dataclass(frozen=True)
class LakeTable:
    name: str
    prefix: str  # Delta: key prefix of the table in the bucket; Iceberg: "" (the catalog places it)
    description: str
    format: TableFormat = TableFormat.DELTA
    domain: str = Domain.LAKE
    #: The write lock (core/lock.py) of the run that writes this table, when another table's
    #: run writes it too; empty: the table's own name (the ledger's: delta-rs's optimistic
    #: appends retry on conflict). Maintenance and restore take it.
    written_under: str = ""
    #: The tables this one is derived from (a history, change feed, quarantine, tombstones,
    #: report): it goes back with them when one is restored (or is rebuilt from them), never alone.
    derived_from: tuple[str, ...] = ()
    #: A Delta table with a change feed: its key columns and the feed table's name (core/change_feed.py).
    keys: tuple[str, ...] = ()
    feed: str = ""

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
    def asset_path(self) -> list[str]:
        """Its asset's key in Dagster: the name, a catalog namespace its prefix (`tpcds.web_sales` is
        `tpcds/web_sales`, as the catalog and the UI's folders have it; `insurance` is `insurance`)."""
        return self.name.split(".")

    @property
    def identifier(self) -> tuple[str, str]:
        """(namespace, table) of an Iceberg table in the catalog."""
        namespace, _, name = self.name.partition(".")
        return namespace, name


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
#: The star's tables the change core applies on their declaration files (web_sales: the star's loader,
#: whose rejects and deletes go to the core's `web_sales_quarantine` and `web_sales_tombstones`, as
#: every declared table's do).
TPCDS_ON_CORE = (TPCDS_DATE_DIM, TPCDS_TIME_DIM, TPCDS_CUSTOMER, TPCDS_ITEM)
#: The star's one quarantine before each of its tables had its own (`<table>_quarantine`): earlier
#: releases' rejects, kept and read (checks, the quarantine asset), never written again.
TPCDS_QUARANTINE = LakeTable("tpcds_quarantine", "curated/tpcds_quarantine",
                             "raw TPC-DS rows earlier releases could not apply, with the reason (since then each "
                             "table's own <table>_quarantine)", domain=Domain.TPCDS,
                             derived_from=tuple(t.name for t in TPCDS_STAR))
#: web_sales' tombstones before they were the change core's `web_sales_tombstones`: earlier releases'
#: deletes, each naming its Iceberg table (`table_uuid`), kept and read by every load, never written again.
TPCDS_TOMBSTONES = LakeTable("tpcds_tombstones", "curated/tpcds_tombstones",
                             "web_sales keys earlier releases deleted and the sequence of their delete (since then "
                             "web_sales_tombstones)", domain=Domain.TPCDS, derived_from=(TPCDS_WEB_SALES.name,))

#: The business zone: one Iceberg table per report SQL file in tpcds/reports/ (a test keeps them in step),
#: rebuilt from the star after its loads and restores.
TPCDS_REPORTS = tuple(_tpcds(f"report_{name}", f"BI report {name}, recomputed from the star (tpcds/reports/{name}.sql)",
                             tuple(t.name for t in TPCDS_STAR))
                      for name in ("q12", "q41", "q86", "q92", "sales_by_hour", "top_customers"))

#: The lake's own tables (the declared tables join them: `TABLES`).
OWN_TABLES: dict[str, LakeTable] = {t.name: t for t in (LEDGER, *TPCDS_STAR, TPCDS_QUARANTINE, TPCDS_TOMBSTONES,
                                                         *TPCDS_REPORTS)}


@dataclass(frozen=True)
class TableSet:
    """A declared table and the tables the change core keeps beside it (core/apply/)."""

    table: LakeTable
    quarantine: LakeTable
    tombstones: LakeTable
    changes: LakeTable
    history: LakeTable

    def kept(self, declaration: "TableDeclaration") -> list[LakeTable]:
        """The tables the declaration keeps (a feed and a history only when declared)."""
        return [self.table, self.quarantine, self.tombstones, *([self.changes] if self.table.feed else []),
                *([self.history] if declaration.history else [])]


def table_set(declaration: "TableDeclaration") -> TableSet:
    """The tables of a declared table: itself (Delta: `curated/<name>`; Iceberg: `<group>.<name>` in
    the catalog) and, beside it, its quarantine, tombstones, change feed (Delta tables only: an
    Iceberg table's is read from its snapshots) and SCD2 history (Delta, `curated/<name>_quarantine`, ...)."""
    name = declaration.name
    if declaration.format is TableFormat.ICEBERG:  # in the catalog, its namespace the group; a feed from snapshots
        curated = LakeTable(declaration.table_name, "", declaration.description, TableFormat.ICEBERG,
                            domain=declaration.group, keys=declaration.keys)
    else:
        curated = LakeTable(name, f"curated/{name}", declaration.description, domain=declaration.group,
                            keys=declaration.keys, feed=f"{name}_changes" if declaration.change_feed else "")

    def beside(suffix: str, description: str) -> LakeTable:
        return LakeTable(f"{name}_{suffix}", f"curated/{name}_{suffix}", description, domain=declaration.group,
                         written_under=curated.name, derived_from=(curated.name,), keys=declaration.keys)
    return TableSet(
        curated,
        beside("quarantine", "raw rows that could not be applied, with the reason"),
        beside("tombstones", "deleted keys and the sequence of their delete, kept for the retention window"),
        beside("changes", f"change feed of {name}: one row per insert, update pre/post image or delete, per table "
                          "version (_change_type, _commit_version, _commit_timestamp)"),
        beside("history", f"SCD type 2 history of {name} on the source sequence: one row per version, _sequence "
                          "to valid_to_sequence (valid_from/valid_to their times), deletes as _operation D rows, "
                          "is_current"))


class _Registry(Mapping[str, LakeTable]):
    """Every table by name: the lake's own, and every declared table's (read from the declarations
    when first asked, so a mistake in one surfaces as a command's one-line error, not at import)."""

    def __getitem__(self, name: str) -> LakeTable:
        return _tables()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(_tables())

    def __len__(self) -> int:
        return len(_tables())


def _tables() -> dict[str, LakeTable]:
    from lake_assets.core.registry import declarations, star_declarations  # they read this module's types

    declared = {t.name: t for d in declarations() for t in table_set(d).kept(d)}
    star = [star_declarations()[t.identifier[1]] for t in TPCDS_ON_CORE]
    beside = {t.name: t for d in star for t in table_set(d).kept(d) if t.name not in OWN_TABLES}  # item_quarantine
    fact = table_set(star_declarations()[TPCDS_WEB_SALES.identifier[1]])  # web_sales' own: the star's loader's
    return {**declared, **beside, fact.quarantine.name: fact.quarantine, fact.tombstones.name: fact.tombstones,
            **OWN_TABLES}


TABLES: Mapping[str, LakeTable] = _Registry()


class UnknownTable(UsageError):
    """A table name that is not in the registry."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown table {name!r}; known tables: {', '.join(sorted(TABLES))}")


def table(name: str) -> LakeTable:
    """The table called `name`; a declared Iceberg table also by its declaration's name (`orders`
    for `shop.orders`, as `lake put`, `lake status` and its assets call it)."""
    tables = _tables()
    if name in tables:
        return tables[name]
    declared = [t for t in tables.values()
                if t.format is TableFormat.ICEBERG and t.name == f"{t.domain}.{name}" and t.name not in OWN_TABLES]
    if len(declared) == 1:
        return declared[0]
    raise UnknownTable(name)


class TableNotBuilt(UsageError):
    """A registered table that has not been written yet; the message says what builds it."""

    def __init__(self, name: str) -> None:
        if TABLES.get(name) in TPCDS_REPORTS:
            super().__init__(f"table {name} does not exist yet: reports are built from the TPC-DS star after it "
                             "loads (`lake dev` refreshes them after each load; `lake run` loads and refreshes now)")
        else:
            super().__init__(f"table {name} does not exist yet (nothing applied); see `lake status`")
