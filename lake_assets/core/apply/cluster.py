"""Write a frame as files of disjoint key ranges (a table clustered by its key), on any engine.

A CDC batch touches only the files whose key range holds one of its keys (commit.py's narrow
replace), so a table must be written in files of narrow, disjoint key ranges. Sail 0.7.2 does
not give that from the usual calls (measured on 1M rows): its Delta writer with a target file
size spreads each partition's rows over every file it writes, whatever their order (14 files,
each spanning the whole key range, after a global `orderBy`), `repartitionByRange` partitions
by hash, and `approxQuantile` is missing. Without a target file size it writes one file per
partition. So `clustered` cuts the key range at approximate quantiles (`percentile_approx`)
into one bucket per file and sends each bucket to a partition of its own: the engine's hash
partitioning is probed once for a label that lands in each partition (`spark_partition_id`),
so no two buckets share one. JVM Spark runs the same code.
"""

import math
from collections.abc import Sequence

import numpy as np

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

#: Rows per file the lake's Delta tables aim at (~4 MiB of policy rows: a narrow commit rewrites
#: little, and a 10M-row table is a few dozen files).
TARGET_FILE_ROWS = 300_000
#: About the same in bytes, for delta-rs's compaction (jobs/maintenance.py).
TARGET_FILE_BYTES = 4 << 20
_BUCKET = "_lake_bucket"


def clustered(frame: DataFrame, key: str, rows: int, cuts: Sequence[int] = ()) -> DataFrame:
    """`frame` (about `rows` rows) in ceil(rows / TARGET_FILE_ROWS) partitions of contiguous `key`
    ranges, each sorted by `key` (write it without a target file size: one file per partition).

    `cuts`: where the files it replaces began (`file_cuts`): a rewrite of a clustered table keeps
    its files' ranges, and the frame is not read once more for its quantiles, unless its files
    would be more than twice the target (inserts grew them: quantiles then)."""
    files = max(1, math.ceil(rows / TARGET_FILE_ROWS))
    if files == 1:
        return frame.coalesce(1).sortWithinPartitions(key)
    if cuts and rows <= 2 * TARGET_FILE_ROWS * (len(cuts) + 1):
        bounds = sorted(set(cuts))
    else:
        quantiles = frame.agg(*[F.percentile_approx(F.col(key), i / files).alias(f"q{i}")
                                for i in range(1, files)]).collect()[0]
        bounds = sorted({value for value in quantiles if value is not None})
    if not bounds:  # no key (or no row) to cut at: one file
        return frame.coalesce(1).sortWithinPartitions(key)
    labels = partition_labels(frame.sparkSession, len(bounds) + 1)
    # one flat CASE (the first bound above the key): a CASE nested per file is a plan message as
    # deep as the file count, which Spark Connect's protobuf refuses past ~45 (a 14M-row load)
    bucket = F.when(F.col(key) < F.lit(bounds[0]), F.lit(labels[0]))
    for bound, label in zip(bounds[1:], labels[1:]):
        bucket = bucket.when(F.col(key) < F.lit(bound), F.lit(label))
    bucket = bucket.otherwise(F.lit(labels[len(bounds)]))
    return (frame.withColumn(_BUCKET, bucket.cast("bigint")).repartition(len(bounds) + 1, _BUCKET)
            .drop(_BUCKET).sortWithinPartitions(key))


def laid_out(frame: DataFrame, keys: Sequence[str], integer_key: bool, rows: int, cuts: Sequence[int] = ()) -> DataFrame:
    """`frame` as a table of the lake is written: `clustered` by its first key when that is an
    integer, else sorted by its keys within each partition (a text key has no ranges to cut)."""
    return clustered(frame, keys[0], rows, cuts) if integer_key else frame.sortWithinPartitions(*keys)


def partition_labels(spark: SparkSession, partitions: int) -> list[int]:
    """A value per partition that `repartition(partitions, column)` sends there (a bigint column),
    found by asking the engine where it sends the first few thousand values."""
    probe = spark.range(0, 64 * partitions).repartition(partitions, "id") \
        .select("id", F.spark_partition_id().alias("p")).groupBy("p").agg(F.min("id").alias("id")).collect()
    found = {int(r["p"]): int(r["id"]) for r in probe}
    if len(found) < partitions:  # a partition no probe reached: plain values (buckets may then share one)
        return list(range(partitions))
    return [found[p] for p in range(partitions)]


def file_cuts(mins: np.ndarray, maxs: np.ndarray, ranges: Sequence[tuple[int, int]] | None = None) -> list[int]:
    """Where the files (their key `mins`/`maxs`, from the log) begin, but the first: the cuts that
    keep their ranges (`ranges`: only the files meeting one of them, the ones a narrow replace
    rewrites). A file without statistics (an unbounded range) gives none: quantiles then."""
    info = np.iinfo(np.int64)
    if (mins == info.min).any() or (maxs == info.max).any():
        return []
    chosen = np.ones(len(mins), bool) if ranges is None else files_meeting(ranges, mins, maxs)
    return sorted(int(v) for v in mins[chosen])[1:]


def files_meeting(ranges: Sequence[tuple[int, int]], mins: np.ndarray, maxs: np.ndarray) -> np.ndarray:
    """Which files (their key `mins`/`maxs`) meet one of `ranges` (sorted, disjoint closed ranges)."""
    if not ranges:
        return np.zeros(len(mins), bool)
    lows, highs = np.array([r[0] for r in ranges]), np.array([r[1] for r in ranges])
    return np.searchsorted(lows, maxs, "right") > np.searchsorted(highs, mins, "left")
