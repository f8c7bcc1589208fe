"""Plans whose size grows with the data or the declaration stay flat enough for Spark Connect.

Spark Connect sends a plan as one protobuf message, and the client refuses to parse one nested
deeper than ~45 expression levels (`DecodeError: Error parsing message with type
'spark.connect.Expression'`, measured on Sail). A 20M-row load is 67 files of
`TARGET_FILE_ROWS`, and `clustered`'s bucket was a CASE nested per file: the run failed. A
history tracking a wide table's columns was an OR nested per column. A union folded one part at
a time (a TPC-DS load reading its day objects one by one, pending corrections) stopped the client
at 400 parts with Python's `RecursionError`. Each, on the session's Sail engine, well past that.
"""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lake_assets.core.apply.cluster import TARGET_FILE_ROWS, clustered
from lake_assets.core.apply.history import COMMIT_VERSION, IS_CURRENT, Tracking, versions
from lake_assets.core.apply.reader import SEQUENCE
from lake_assets.core.apply.validate import OPERATION
from lake_assets.core.frames import union_all
from lake_assets.resources.storage import LakeStorage


def test_a_load_of_many_files_is_cut_into_disjoint_key_ranges(spark: SparkSession) -> None:
    frame = spark.range(0, 20_000).withColumnRenamed("id", "k")
    out = clustered(frame, "k", 150 * TARGET_FILE_ROWS).select("k", F.spark_partition_id().alias("p"))
    parts = out.groupBy("p").agg(F.min("k").alias("lo"), F.max("k").alias("hi"), F.count("k").alias("n")).collect()
    assert sum(r["n"] for r in parts) == 20_000
    assert len(parts) > 100  # about one partition per cut (quantiles are approximate)
    spans = sorted((r["lo"], r["hi"]) for r in parts)
    assert all(left[1] < right[0] for left, right in zip(spans, spans[1:])), spans


def test_a_history_tracking_80_columns_makes_a_version_per_tracked_change(spark: SparkSession) -> None:
    tracked = [f"c{i}" for i in range(80)]
    columns = ["id", *tracked, "note", OPERATION, SEQUENCE]
    base = dict.fromkeys(tracked, 1)
    changes = [  # key 1: a tracked change at s2, an untracked one at s3; key 2: one change
        {"id": 1, **base, "note": "a", OPERATION: "I", SEQUENCE: "s1"},
        {"id": 1, **base, "c79": 2, "note": "a", OPERATION: "U", SEQUENCE: "s2"},
        {"id": 1, **base, "c79": 2, "note": "b", OPERATION: "U", SEQUENCE: "s3"},
        {"id": 2, **base, "note": "x", OPERATION: "I", SEQUENCE: "s1"},
    ]
    schema = ", ".join([f"id INT, {', '.join(f'{c} INT' for c in tracked)}, note STRING, {OPERATION} STRING, "
                        f"{SEQUENCE} STRING, {COMMIT_VERSION} BIGINT"])
    rows = spark.createDataFrame([(*[c[k] for k in columns], 1) for c in changes], schema)
    found = versions(rows, ["id"], columns, Tracking(tracked=tuple(tracked), timed=False)).collect()
    got = sorted((r["id"], r[SEQUENCE], r["c79"], r["note"], r[IS_CURRENT]) for r in found)
    assert got == [(1, "s1", 1, "a", False), (1, "s2", 2, "b", True), (2, "s1", 1, "x", True)]


def test_a_union_of_400_reads_is_one_plan(storage: LakeStorage, spark: SparkSession) -> None:
    storage.put_bytes("raw/parts/one.txt", b"1\n2\n")
    reads = [spark.read.text(storage.uri("raw/parts/one.txt")).withColumn("part", F.lit(i)) for i in range(400)]
    counted = union_all(reads).groupBy("part").count().collect()
    assert len(counted) == 400 and {r["count"] for r in counted} == {2}
