"""The TPC-DS checks' own evaluation, on tables written behind the loader's back."""

from pyspark.sql import SparkSession

from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.checks import evaluate_key_unique
from lake_assets.tpcds.load import ensure_table
from lake_assets.tpcds.schema import COLUMNS, TpcdsTable


def test_the_key_check_counts_duplicate_keys_their_rows_and_null_keys_in_one_scan(
        storage: LakeStorage, catalog: LakeCatalog, spark: SparkSession) -> None:
    ensure_table(storage, TpcdsTable.DATE_DIM)
    engine = SparkEngine()

    def write(keys: list[int | None]) -> None:
        columns = COLUMNS[TpcdsTable.DATE_DIM]  # the key, every other column NULL
        rows = [(k, *[None] * (len(columns) - 1)) for k in keys]
        spark.createDataFrame(rows, ", ".join(f"{c} {t}" for c, t in columns)).writeTo("tpcds.date_dim").append()

    write([1, 2, 3])
    clean = evaluate_key_unique(storage, engine, TpcdsTable.DATE_DIM)
    assert clean.passed
    assert [clean.metadata[m].value for m in ("duplicate_keys", "rows_with_duplicate_keys", "rows_with_null_key")] \
        == [0, 0, 0]

    write([2, 2, None])  # key 2 three times, one NULL key
    dirty = evaluate_key_unique(storage, engine, TpcdsTable.DATE_DIM)
    assert not dirty.passed
    assert [dirty.metadata[m].value for m in ("duplicate_keys", "rows_with_duplicate_keys", "rows_with_null_key")] \
        == [1, 3, 1]

    write([None])  # two NULL keys: a duplicate of each other, as GROUP BY sees them
    nulls = evaluate_key_unique(storage, engine, TpcdsTable.DATE_DIM)
    assert [nulls.metadata[m].value for m in ("duplicate_keys", "rows_with_duplicate_keys", "rows_with_null_key")] \
        == [2, 5, 2]
