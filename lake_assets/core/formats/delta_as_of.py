"""A Delta table as of an older version, and the rows a commit replaced, read on the engine from
data files the log names.

Sail 0.7.2 writes a checkpoint every 10 commits and then cannot time-travel to most versions
before it: with checkpoints at 10 and 20, `versionAsOf` fails for versions 2-9 and 12-19
("Missing commit file: expected version 0, found 8"); the newest version always reads. So an
older version is read the way Delta defines it: delta-rs lists the data files (and the columns)
of that version from the log, and the engine reads those Parquet files with the table's schema.
Sail writes no deletion vectors, so the files (with their partition values from the log:
delta_files.py) are the version's rows; a table whose protocol has deletion vectors (a JVM
engine configured to write them) is read with the engine's own time travel.
"""

import datetime as dt
from urllib.parse import unquote

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from lake_assets.core.change_feed import read_commit
from lake_assets.core.formats.delta import open_table
from lake_assets.core.formats.delta_files import read_files
from lake_assets.core.tables import LakeTable
from lake_assets.resources.storage import LakeStorage


def read_as_of(spark: SparkSession, storage: LakeStorage, table: LakeTable, version: int) -> DataFrame:
    """`table` as of `version` (which must exist: see `delta.ensure_readable`), with that version's columns."""
    newest = spark.read.format("delta").load(table.uri(storage))
    latest = open_table(storage, table)
    if latest is not None and latest.version() == version:
        return newest
    delta = open_table(storage, table, version)
    assert delta is not None, f"{table.name} has no version {version}"
    if "deletionVectors" in (delta.protocol().reader_features or []):
        return spark.read.format("delta").option("versionAsOf", version).load(table.uri(storage))
    columns = [field.name for field in delta.schema().fields]  # a column added later is not there yet
    files = pa.table(delta.get_add_actions(flatten=True)).to_pydict()
    partitioned = [name.removeprefix("partition.") for name in files if name.startswith("partition.")]
    paths = [unquote(path) for path in files["path"]]
    partitions = {path: {column: _logged(files[f"partition.{column}"][i]) for column in partitioned}
                  for i, path in enumerate(paths)} if partitioned else {}
    return read_files(spark, table.uri(storage), newest.schema, paths, partitions).select(*columns)


def replaced_rows(spark: SparkSession, storage: LakeStorage, table: LakeTable, version: int) -> DataFrame:
    """The rows of the data files commit `version` removed (every row of each file it rewrote), with
    the table's newest schema (a column added since reads NULL): the pre-images of the rows it changed."""
    newest = spark.read.format("delta").load(table.uri(storage))
    commit = read_commit(storage, table, version)
    return read_files(spark, table.uri(storage), newest.schema, commit.removed, commit.partitions)


def _logged(value: object) -> str | None:
    """A partition value as the log states it (delta-rs hands it typed)."""
    return None if value is None else value.isoformat() if isinstance(value, dt.date) else str(value)
