"""A rewrite of a clustered table keeps its files' key ranges (cluster.py's `cuts`), and the
frame it writes is not read once more for quantiles; files without statistics, or grown past
twice the target, are cut at quantiles as before."""

import numpy as np
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lake_assets.core.apply.cluster import TARGET_FILE_ROWS, clustered, file_cuts

INT64 = np.iinfo(np.int64)


def test_the_cuts_are_where_the_files_begin_but_the_first() -> None:
    mins, maxs = np.array([200, 0, 400, 600]), np.array([399, 199, 599, 799])
    assert file_cuts(mins, maxs) == [200, 400, 600]
    assert file_cuts(mins, maxs, [(250, 450)]) == [400]  # the files a narrow replace rewrites: 200.., 400..
    assert file_cuts(np.array([0, INT64.min]), np.array([9, INT64.max])) == []  # a file without statistics


def _starts(frame) -> list[int]:
    parts = frame.select("k", F.spark_partition_id().alias("p")).groupBy("p").agg(F.min("k").alias("lo")).collect()
    return sorted(r["lo"] for r in parts)


def test_a_rewrite_keeps_the_files_ranges(spark: SparkSession) -> None:
    frame = spark.range(0, 1000).withColumnRenamed("id", "k")
    kept = clustered(frame, "k", 4 * TARGET_FILE_ROWS, cuts=[250, 500, 750])
    assert _starts(kept) == [0, 250, 500, 750]
    grown = clustered(frame, "k", 12 * TARGET_FILE_ROWS, cuts=[250, 500, 750])  # 3 files per range: quantiles
    assert len(_starts(grown)) > 4


def test_a_first_history_is_cut_where_its_table_is(storage, spark: SparkSession, monkeypatch) -> None:
    """The first history write takes the files' ranges of the table just committed (no quantiles
    of its own), though its rows differ: the run's deletes are history rows, not table rows."""
    from deltalake import DeltaTable

    from lake_assets.core.apply import cluster
    from lake_assets.core.apply.run import apply_pending
    from lake_assets.core.formats.delta import file_ranges
    from lake_assets.core.tables import table_set
    from lake_assets_tests.helpers.full_loads import loaded_table

    monkeypatch.setattr(cluster, "TARGET_FILE_ROWS", 100)
    table = loaded_table("cuts", ["name STRING"])
    storage.put_bytes(f"raw/{table.name}/fullload/LOAD00000001.csv",
                      "".join(f"{k},n{k}\n" for k in range(1, 451)).encode())
    storage.put_bytes(f"raw/{table.name}/cdc/20990101-000000000.csv",
                      "".join(f"D,{k},\n" for k in range(1, 121)).encode())  # newer than the load: deletes
    apply_pending(table, storage, spark, "run-1")
    tables = table_set(table)
    options = storage.delta_storage_options()
    cuts = {name: file_cuts(*file_ranges(DeltaTable(entry.uri(storage), storage_options=options), "id")[:2])
            for name, entry in (("table", tables.table), ("history", tables.history))}
    assert len(cuts["table"]) >= 2 and cuts["history"] == cuts["table"]
