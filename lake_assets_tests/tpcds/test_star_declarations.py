"""The star's tables are declared in files as any table is (`lake_assets/tables/tpcds/`), and those
files are what the star's loader reads: its columns, keys and partitioning, its raw zone as the
generator lands it, each column described where users see tables (the UI, DESCRIBE, the Iceberg
schema's docs). dsdgen (DuckDB) is the independent reference for the columns."""

import datetime as dt

import duckdb
import pytest

from lake_assets.core import registry
from lake_assets.core.column_descriptions import AUDIT_DESCRIPTIONS, STAR_FACT_DESCRIPTIONS, column_descriptions
from lake_assets.core.declaration import DayValues, SequenceFrom, SourceKind
from lake_assets.core.partition_fields import Transform, partition_field
from lake_assets.tpcds import raw_contract
from lake_assets.core.snapshot_guard import SnapshotGuard
from lake_assets.core.tables import table_set
from lake_assets.tpcds.load import day_guard, iceberg_schema
from lake_assets.tpcds.raw_duckdb import dsdgen_columns
from lake_assets.declared.partitions import partition_key, partitions_def
from lake_assets.tpcds.assets import DAILY
from lake_assets.tpcds.schema import COLUMNS, FIRST_DAY, FOREIGN_KEYS, KEYS, LAST_DAY, PARTITION_COLUMN, PARTITION_DAYS, ledger_name

pytestmark = pytest.mark.unit

#: The Spark SQL type the star keeps each dsdgen type as (every integer BIGINT, so joins never widen).
_KEPT = {"BIGINT": "BIGINT", "INTEGER": "BIGINT", "VARCHAR": "STRING", "DATE": "DATE", "DECIMAL(7,2)": "DECIMAL(7,2)"}


def test_one_file_declares_each_star_table_and_the_loader_reads_it() -> None:
    star = registry.star_declarations()
    assert sorted(star) == sorted(raw_contract.STAR_TABLES)
    for name, declared in star.items():
        assert (declared.group, declared.format.value, declared.history) == ("tpcds", "iceberg", False), name
        assert COLUMNS[name] == [(c.name, c.type) for c in declared.columns] and KEYS[name] == declared.keys, name
        # one identity: the core would record its ledger entries and take its lease as the loader does
        assert declared.table_name == table_set(declared).table.write_lock == ledger_name(name), name
    (fact_partition,) = (partition_field(p) for p in star["web_sales"].partition_by)
    assert (fact_partition.transform, fact_partition.column, fact_partition.width) == \
        (Transform.TRUNCATE, PARTITION_COLUMN, PARTITION_DAYS) == (Transform.TRUNCATE, raw_contract.DAY_FOLDER_COLUMN, 365)


def test_the_fact_is_partitioned_in_dagster_by_the_days_of_tpc_dss_calendar() -> None:
    """Every scale's sold days, 1998-01-02 .. 2003-01-02, each named by its Julian day number (DuckDB's
    `julian()`) in the folders, and by its date in Dagster."""
    fact = registry.star_declarations()["web_sales"]
    assert fact.daily_partitions is not None and fact.daily_partitions.values is DayValues.JULIAN_DAY
    assert (FIRST_DAY, LAST_DAY) == (fact.daily_partitions.start, fact.daily_partitions.end) == \
        (dt.date(1998, 1, 2), dt.date(2003, 1, 2))
    assert DAILY.get_partition_keys() == partitions_def(fact).get_partition_keys()
    first = int(duckdb.sql("SELECT julian(DATE '1998-01-02')").fetchone()[0])
    assert raw_contract.fact_folder(FIRST_DAY) == f"{raw_contract.FACT_PREFIX}ws_sold_date_sk={first}/"
    assert partition_key(fact, first) == "1998-01-02" == DAILY.get_partition_keys()[0]


def test_the_day_objects_guard_is_the_declared_one() -> None:
    """The star's: a day object is held when empty or shrinking its day by more than half, never for its
    refused lines alone; LAKE_FULLLOAD_MAX_SHRINK's share, when set, overrides the declared one."""
    declared = registry.star_declarations()["web_sales"].guard
    assert (declared.max_shrink, declared.hold_rejected) == (0.5, False)
    assert day_guard() == SnapshotGuard(max_shrink=0.5, hold_rejected=False)
    assert day_guard(0.2) == SnapshotGuard(max_shrink=0.2, hold_rejected=False)
    assert registry.star_declarations()["web_sales"].tombstone_retention_days is None  # the star's: kept for good


def test_the_declared_columns_are_dsdgens_and_the_keys_tpc_dss() -> None:
    for name, columns in dsdgen_columns().items():
        assert COLUMNS[name] == [(column, _KEPT[kind]) for column, kind in columns], name
    assert KEYS["web_sales"] == raw_contract.FACT_KEY
    for name in raw_contract.DIMENSIONS:  # a dimension's key is its surrogate key, its first column
        assert KEYS[name] == (COLUMNS[name][0][0],) and KEYS[name][0].endswith("_sk"), name
    assert all(KEYS[dimension] == (key,) for _, dimension, key in FOREIGN_KEYS)


def test_the_declared_sources_are_where_the_generator_lands_the_objects() -> None:
    star = registry.star_declarations()
    fact, corrections = star["web_sales"].sources
    assert (fact.prefix, fact.kind, fact.partition) == (raw_contract.FACT_PREFIX, SourceKind.SNAPSHOT,
                                                        raw_contract.DAY_FOLDER_COLUMN)
    assert (corrections.prefix, corrections.kind) == (raw_contract.CDC_PREFIX, SourceKind.CDC)
    assert raw_contract.fact_key(None).startswith(fact.prefix)
    assert raw_contract.cdc_key(dt.datetime.now(dt.timezone.utc)).startswith(corrections.prefix)
    for name in raw_contract.DIMENSIONS:
        (source,) = star[name].sources
        assert raw_contract.dimension_key(name).startswith(source.prefix), name
        assert (source.kind, source.sequence_from) == (SourceKind.CDC, SequenceFrom.ARRIVAL), name
    for declared in star.values():
        assert all((s.delimiter, s.suffix) == (raw_contract.DELIMITER, raw_contract.EXTENSION)
                   for s in declared.sources), declared.name


def test_every_star_column_is_described_where_users_read_the_table() -> None:
    for name, declared in registry.star_declarations().items():
        described = column_descriptions(ledger_name(name))
        assert all(c.description and described[c.name] == c.description for c in declared.columns), name
        docs = {f.name: f.doc for f in iceberg_schema(name).fields}
        assert all(docs[c.name] == c.description for c in declared.columns), name
    # web_sales' `_sequence` is its loader's; a dimension's audit columns are the change core's, which applies it
    assert column_descriptions("tpcds.web_sales")["_sequence"] == STAR_FACT_DESCRIPTIONS["_sequence"]
    assert {k: column_descriptions("tpcds.item")[k] for k in AUDIT_DESCRIPTIONS} == AUDIT_DESCRIPTIONS
    assert column_descriptions("tpcds.report_q12") == {}
