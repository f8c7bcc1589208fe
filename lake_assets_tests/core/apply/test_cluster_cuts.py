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
