"""Shared core pieces both domains use: the table registry, the quarantine writer, the CDC MERGE."""

import datetime as dt

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.cdc import merge_sql
from lake_assets.core.formats import iceberg
from lake_assets.core.quarantine import QUARANTINE_SCHEMA, insert_absent_frame
from lake_assets.core.tables import TABLES, Domain, LakeTable, TableFormat, table
from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.storage import LakeStorage

PROBE = LakeTable("probe_quarantine", "curated/probe_quarantine", "test")


def _rows(lines: list[int]) -> pa.Table:
    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return pa.table({
        "source_file": ["raw/x.dat"] * len(lines), "source_etag": ["e1"] * len(lines), "line_number": lines,
        "reason": ["bad_value"] * len(lines), "detail": ["d"] * len(lines), "raw_text": ["t"] * len(lines),
        "run_id": ["r"] * len(lines), "quarantined_at": [at] * len(lines),
    }, schema=QUARANTINE_SCHEMA)


def test_registry_knows_format_and_domain_of_every_table() -> None:
    assert table("tpcds.web_sales").format is TableFormat.ICEBERG
    assert table("tpcds.web_sales").identifier == ("tpcds", "web_sales")
    assert table("tpcds_quarantine").format is TableFormat.DELTA
    assert {t.domain for t in TABLES.values()} == {"insurance", Domain.TPCDS, Domain.LAKE}  # insurance: a declaration's group
    star = {"tpcds.web_sales", "tpcds.date_dim", "tpcds.time_dim", "tpcds.customer", "tpcds.item", "tpcds_quarantine",
            "tpcds_tombstones"}
    reports = {f"tpcds.report_{name}" for name in ("q12", "q41", "q86", "q92", "sales_by_hour", "top_customers")}
    assert {n for n, t in TABLES.items() if t.domain is Domain.TPCDS} == star | reports


def test_the_quarantine_writer_inserts_only_absent_rows(storage: LakeStorage, spark: SparkSession) -> None:
    insert_absent_frame(storage, PROBE, spark.createDataFrame(_rows([1, 2]).to_pandas()))
    insert_absent_frame(storage, PROBE, spark.createDataFrame(_rows([2, 3, 4]).to_pandas()))  # a rerun repeats 2
    lines = DeltaTable(PROBE.uri(storage), storage_options=storage.delta_storage_options()).to_pyarrow_table()
    assert sorted(lines["line_number"].to_pylist()) == [1, 2, 3, 4]


def test_cdc_merge_statement_deletes_updates_inserts(catalog: LakeCatalog, spark: SparkSession) -> None:
    spark.sql("CREATE DATABASE IF NOT EXISTS tpcds")
    spark.sql("CREATE TABLE tpcds.probe_cdc (k BIGINT, v STRING) USING iceberg")
    spark.sql("INSERT INTO tpcds.probe_cdc VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.createDataFrame([(1, "A", "U"), (2, None, "D"), (4, "d", "I"), (5, None, "D")],
                          "k BIGINT, v STRING, _operation STRING").createOrReplaceTempView("probe_batch")
    spark.sql(merge_sql("tpcds.probe_cdc", "probe_batch", ["k"], ["k", "v"])).collect()
    assert sorted(tuple(r) for r in spark.table("tpcds.probe_cdc").collect()) == [(1, "A"), (3, "c"), (4, "d")]
    probe = LakeTable("tpcds.probe_cdc", "", "test", TableFormat.ICEBERG, Domain.TPCDS)
    current = iceberg.open_table(catalog.storage, probe)
    assert iceberg.row_count(current) == 3
    history = iceberg.history(current)
    assert len(history) == 2 and history[0]["total_records"] == 3 and history[1]["total_records"] == 3
