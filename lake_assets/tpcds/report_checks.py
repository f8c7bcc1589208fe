"""Compare a report table with DuckDB running the report's SQL on the raw files (no Dagster)."""

import datetime as dt
import decimal
import math

import duckdb
from pyspark.sql import SparkSession

from lake_assets.tpcds.reports import Report

REL_TOL = 1e-9
ABS_TOL = 1e-6


def _plain(value: object) -> object:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (decimal.Decimal, float, int)):
        return float(value)
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    return value


def _sort_key(row: tuple) -> tuple:
    return tuple("" if v is None else str(round(v, 4) if isinstance(v, float) else v) for v in row)


def _equal(left: object, right: object) -> bool:
    if isinstance(left, float) and isinstance(right, float):
        return math.isclose(left, right, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return left == right


def diff_rows(actual: list[tuple], expected: list[tuple]) -> list[dict]:
    """Differences between two results as multisets (numbers within a tolerance); [] when equal."""
    left = sorted((tuple(map(_plain, r)) for r in actual), key=_sort_key)
    right = sorted((tuple(map(_plain, r)) for r in expected), key=_sort_key)
    if len(left) != len(right):
        return [{"rows": len(left), "expected_rows": len(right)}]
    return [{"row": str(a), "expected": str(e)} for a, e in zip(left, right)
            if len(a) != len(e) or not all(_equal(x, y) for x, y in zip(a, e))]


def compare_report(spark: SparkSession, oracle: duckdb.DuckDBPyConnection, report: Report) -> tuple[list[dict], int]:
    """(differences, rows) between the report's table and `oracle` (views `lake.tpcds.*`) running its SQL."""
    actual = [tuple(row) for row in spark.table(report.engine_table).collect()]
    expected = oracle.execute(report.sql).fetchall()
    return diff_rows(actual, expected), len(expected)
