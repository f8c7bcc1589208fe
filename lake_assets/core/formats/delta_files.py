"""Read a Delta table's data files on the engine, partition columns included.

A partitioned Delta table does not store its partition columns in its data files: the log gives
each file's values (`partitionValues`). Sail 0.7.2's Parquet reader does not recover them from
the `column=value/` folders either (`basePath` is ignored; they read as NULL). So the files of
each partition are read with the table's schema and given their partition's values from the log.

Paths are handed to the engine URL-encoded but for `/` and `=`: Sail reads a path as a URL, so a
file under `region=north%20east/` (Spark's escaping of a space in a folder name) must be asked for
as `region=north%2520east/`, and a path it cannot find reads as no rows, not as an error. A JVM
Spark server reads a path literally: the partition values that need no escaping (letters,
digits, `-`, `_`, `.`: dates, codes, numbers) read the same on both.
"""

from collections.abc import Mapping
from urllib.parse import quote

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

#: A data file's partition values, as the log states them (a string per column; None is NULL).
PartitionValues = Mapping[str, str | None]


def read_files(spark: SparkSession, root: str, schema: StructType, paths: list[str],
               partitions: Mapping[str, PartitionValues]) -> DataFrame:
    """The rows of the data files `paths` (relative to the table's `root`) with `schema` (a column
    the files lack reads NULL); `partitions`: each path's partition values (none: not partitioned)."""
    if not paths:
        return spark.createDataFrame([], schema)
    groups: dict[tuple[tuple[str, str | None], ...], list[str]] = {}
    for path in paths:
        values = tuple(sorted(partitions.get(path, {}).items()))
        groups.setdefault(values, []).append(f"{root}/{quote(path, safe='/=')}")
    frames = [_with_values(spark.read.schema(schema).parquet(*files), schema, dict(values))
              for values, files in groups.items()]
    while len(frames) > 1:  # pairwise: a plan as deep as log2 of the partitions (Spark Connect refuses ~45+)
        frames = [a.unionByName(b) for a, b in zip(frames[::2], frames[1::2])] + frames[len(frames) // 2 * 2:]
    return frames[0]


def _with_values(frame: DataFrame, schema: StructType, values: dict[str, str | None]) -> DataFrame:
    """`frame` with its partition columns set to `values` (cast from the log's strings), in place."""
    if not values:
        return frame
    return frame.select(*[F.lit(values[field.name]).cast(field.dataType).alias(field.name)
                          if field.name in values else F.col(field.name) for field in schema.fields])
