"""Materialise a report as an Iceberg table in the REST catalog, computed by the engine.

Sail cannot replace a REST-catalog table (`createOrReplace`, overwrite `saveAsTable`), so a
report table is created once from the report's schema (every column optional: Sail refuses
to overwrite a table with required columns) and refreshed with an overwrite of everything,
`writeTo(name).overwrite(lit(True))`: one atomic Iceberg `overwrite` snapshot per refresh, so
readers see the old or the new report, never a mix, and time travel keeps older reports.
A report whose columns changed (its SQL was edited) gets its table dropped and created again.
A report is a page of rows, written as one file (one partition): that exchange is also what
lets Sail's distributed runtime (`SAIL_MODE=local-cluster`, Kubernetes) write an ungrouped
`sum` (q92): without it, Sail 0.7.2 there fails with `ExtendedAggregateUdf: no UDF found for sum`.
"""

import time
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lake_assets.core.tables import ICEBERG_CATALOG
from lake_assets.tpcds.reports import NAMESPACE, Report


@dataclass(frozen=True)
class ReportRefresh:
    table: str
    rows: int
    columns: list[str]
    created: bool
    seconds: float


def _ddl(schema: StructType) -> str:
    return ", ".join(f"`{field.name}` {field.dataType.simpleString()}" for field in schema.fields)


def _same_columns(left: StructType, right: StructType) -> bool:
    return [(f.name, f.dataType) for f in left.fields] == [(f.name, f.dataType) for f in right.fields]


def compute(spark: SparkSession, report: Report) -> DataFrame:
    """The report's rows, every column cast to the type its schema declares.

    Sail 0.7.2 can produce a wider decimal than the plan's schema says (a `sum` next to a
    `count(DISTINCT ...)` gave DECIMAL(27,2) data for a DECIMAL(17,2) column), which the
    Iceberg writer then refuses; the explicit cast makes data and schema agree.
    """
    frame = spark.sql(report.sql)
    return frame.select([F.col(f"`{field.name}`").cast(field.dataType).alias(field.name)
                         for field in frame.schema.fields])


def refresh_report(spark: SparkSession, report: Report) -> ReportRefresh:
    """Recompute `report` from the star and replace its table's contents in one snapshot."""
    started = time.perf_counter()
    frame = compute(spark, report)
    created = False
    name = report.engine_table
    if spark.catalog.tableExists(name) and not _same_columns(spark.table(name).schema, frame.schema):
        spark.sql(f"DROP TABLE {name}")
    if not spark.catalog.tableExists(name):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {ICEBERG_CATALOG}.{NAMESPACE}")
        spark.sql(f"CREATE TABLE {name} ({_ddl(frame.schema)}) USING iceberg")
        created = True
    frame.repartition(1).writeTo(name).overwrite(F.lit(True))
    rows = int(spark.table(name).count())  # Spark Connect returns a numpy integer
    return ReportRefresh(table=report.table, rows=rows, columns=frame.columns, created=created,
                         seconds=round(time.perf_counter() - started, 3))
