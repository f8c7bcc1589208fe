"""Iceberg snapshots and maintenance through pyiceberg and the REST catalog (no Dagster).

- `rollback`: make an earlier snapshot current (pyiceberg `manage_snapshots`).
- `expire_snapshots`: drop snapshots older than a retention window, always keeping the
  newest `retain_last` and every branch/tag head (the metadata only; files stay).
- `remove_orphan_files`: pyiceberg (0.12) has no orphan-file removal, so list the table's location
  with boto3 and delete the data and manifest files no remaining snapshot references (only
  files older than a grace period, so a commit in flight never loses a file).
- `compact`: rewrite each partition holding two or more small data files into one file,
  through the engine (`overwritePartitions`, one atomic snapshot). Scans pay per file (a
  DuckDB reader a few S3 requests each), and every load or day append adds files: the
  nightly run leaves one file per partition. A table with delete files (a merge-on-read
  MERGE's) is rewritten whole (`INSERT OVERWRITE`: Sail refuses a partition overwrite then),
  which folds the deletes into its data files: reads stop paying for them.
- `table_stats`: files, bytes and snapshots, for before/after metadata.
Every commit goes through the REST catalog, so every engine sees it.
"""

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlparse

from botocore.exceptions import BotoCoreError, ClientError

from lake_assets.core.errors import UsageError
from lake_assets.core.formats.iceberg import ancestry, current_snapshot_id, row_count
from lake_assets.resources.storage import LakeStorage

#: Data files smaller than this count as small for compaction.
SMALL_FILE_BYTES = 32 * 1024 * 1024
#: A partition is compacted when it has at least this many small files.
MIN_FILES_TO_COMPACT = 2
#: Unreferenced files younger than this are left alone (a concurrent commit may be writing them).
ORPHAN_GRACE = dt.timedelta(hours=1)


@dataclass(frozen=True)
class TableStats:
    snapshots: int
    data_files: int
    delete_files: int
    data_bytes: int
    rows: int
    objects: int  # every object under the table's location (data, manifests, metadata)
    object_bytes: int

    def as_metadata(self) -> dict[str, int]:
        return {"snapshots": self.snapshots, "data_files": self.data_files, "delete_files": self.delete_files,
                "data_bytes": self.data_bytes,
                "rows": self.rows, "objects": self.objects, "object_bytes": self.object_bytes}


def _location(table) -> tuple[str, str]:  # a pyiceberg Table
    url = urlparse(table.location())
    return url.netloc, url.path.lstrip("/").rstrip("/") + "/"


def list_location(storage: LakeStorage, table) -> list[dict]:
    """Every object under the table's location (bucket may be the catalog's table bucket)."""
    bucket, prefix = _location(table)
    client = storage.get_client()
    objects: list[dict] = []
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            objects.extend(o for o in page.get("Contents", []) if not o["Key"].endswith("/"))
    except (BotoCoreError, ClientError) as error:
        raise storage.unavailable(error) from error
    return objects


def data_files(table) -> list[dict]:
    """The current snapshot's data files (pyiceberg's `inspect.data_files` fails on a snapshot without any)."""
    snapshot = table.current_snapshot()
    if snapshot is None or not snapshot.manifests(table.io):
        return []
    return table.inspect.data_files().to_pylist()


def delete_files(table) -> int:
    """The current snapshot's delete files, from its summary."""
    snapshot = table.current_snapshot()
    summary = snapshot.summary.additional_properties if snapshot is not None and snapshot.summary else {}
    return int(summary.get("total-delete-files", 0))


def table_stats(storage: LakeStorage, table) -> TableStats:
    files = data_files(table)
    objects = list_location(storage, table)
    return TableStats(
        snapshots=len(table.snapshots()), data_files=len(files), delete_files=delete_files(table),
        data_bytes=sum(f["file_size_in_bytes"] for f in files), rows=row_count(table),
        objects=len(objects), object_bytes=sum(o["Size"] for o in objects),
    )


def rollback(table, snapshot_id: int) -> None:
    """Make `snapshot_id` the current snapshot: a rollback if it is an ancestor, else set it current."""
    if table.snapshot_by_id(snapshot_id) is None:
        known = ", ".join(str(s.snapshot_id) for s in table.snapshots()[-5:])
        raise UsageError(f"{table.name()[-1]} has no snapshot {snapshot_id} (latest: {known})")
    if snapshot_id == current_snapshot_id(table):  # already current (a rerun): nothing to commit
        return
    if snapshot_id in ancestry(table, current_snapshot_id(table)):
        table.manage_snapshots().rollback_to_snapshot(snapshot_id).commit()
    else:
        table.manage_snapshots().set_current_snapshot(snapshot_id).commit()


def expire_snapshots(table, older_than: dt.datetime, retain_last: int = 1) -> list[int]:
    """Expire snapshots older than `older_than`, keeping the newest `retain_last` and the current one."""
    newest_first = sorted(table.snapshots(), key=lambda s: s.timestamp_ms, reverse=True)
    keep = {s.snapshot_id for s in newest_first[:max(retain_last, 1)]}
    if table.current_snapshot() is not None:
        keep.add(table.current_snapshot().snapshot_id)
    keep |= {ref.snapshot_id for ref in table.metadata.refs.values()}
    cutoff = older_than.timestamp() * 1000
    expired = [s.snapshot_id for s in newest_first if s.snapshot_id not in keep and s.timestamp_ms < cutoff]
    if expired:
        table.maintenance.expire_snapshots().by_ids(expired).commit()
    return expired


def referenced_files(table) -> set[str]:
    """Every file the table's metadata references: metadata files, manifest lists, manifests, data/delete files."""
    referenced = {table.metadata_location}
    referenced |= {entry.metadata_file for entry in table.metadata.metadata_log}
    for snapshot in table.snapshots():
        referenced.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            referenced.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                referenced.add(entry.data_file.file_path)
    for statistics in table.metadata.statistics:
        referenced.add(statistics.statistics_path)
    for statistics in table.metadata.partition_statistics:
        referenced.add(statistics.statistics_path)
    return referenced


def orphan_files(storage: LakeStorage, table, older_than: dt.datetime) -> list[dict]:
    """Objects under the table's location that nothing references and that are older than `older_than`."""
    bucket, _ = _location(table)
    referenced = {urlparse(path).path.lstrip("/") for path in referenced_files(table)}
    return [o for o in list_location(storage, table)
            if o["Key"] not in referenced and not o["Key"].endswith(".metadata.json")
            and o["LastModified"] < older_than]


def remove_orphan_files(storage: LakeStorage, table, older_than: dt.datetime | None = None) -> list[str]:
    """Delete the table's orphan files (see `orphan_files`); returns their keys."""
    older_than = older_than or dt.datetime.now(dt.timezone.utc) - ORPHAN_GRACE
    orphans = orphan_files(storage, table, older_than)
    bucket, _ = _location(table)
    client = storage.get_client()
    keys = [o["Key"] for o in orphans]
    try:
        for start in range(0, len(keys), 1000):
            client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[start:start + 1000]]})
    except (BotoCoreError, ClientError) as error:
        raise storage.unavailable(error) from error
    return keys


def small_file_partitions(table, small_bytes: int = SMALL_FILE_BYTES,
                          min_files: int = MIN_FILES_TO_COMPACT) -> list[dict]:
    """Partition values (as dicts of partition fields) holding at least `min_files` small data files."""
    files = data_files(table)
    counts = Counter(repr(sorted((f.get("partition") or {}).items())) for f in files
                     if f["file_size_in_bytes"] < small_bytes)
    partitions = {repr(sorted((f.get("partition") or {}).items())): f.get("partition") or {} for f in files}
    return [partitions[key] for key, count in counts.items() if count >= min_files]


def _sql_literal(value: object) -> str:
    if isinstance(value, (dt.date, dt.datetime)):
        return f"DATE '{value.isoformat()[:10]}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def partition_condition(table, partition: dict) -> tuple[str, list[str]] | None:
    """Spark SQL selecting exactly `partition`'s rows, and its source columns; None if a transform is not mapped."""
    from pyiceberg.transforms import DayTransform, IdentityTransform, MonthTransform, TruncateTransform

    terms, columns = [], []
    for field in table.spec().fields:
        column = table.schema().find_column_name(field.source_id)
        value = partition.get(field.name)
        columns.append(column)
        if value is None:
            terms.append(f"`{column}` IS NULL")
        elif isinstance(field.transform, IdentityTransform):
            terms.append(f"`{column}` = {_sql_literal(value)}")
        elif isinstance(field.transform, DayTransform):
            day = value if isinstance(value, dt.date) else dt.date(1970, 1, 1) + dt.timedelta(days=int(value))
            terms.append(f"CAST(`{column}` AS DATE) = {_sql_literal(day)}")
        elif isinstance(field.transform, TruncateTransform) and isinstance(value, int):
            terms.append(f"`{column}` >= {value} AND `{column}` < {value + field.transform.width}")
        elif isinstance(field.transform, MonthTransform):
            terms.append(f"(year(`{column}`) - 1970) * 12 + month(`{column}`) - 1 = {int(value)}")
        else:
            return None
    return (" AND ".join(terms) or "TRUE"), columns


def compact(spark, table, engine_name: str, small_bytes: int = SMALL_FILE_BYTES,
            min_files: int = MIN_FILES_TO_COMPACT) -> int:
    """Rewrite the partitions holding many small files into one file each, in one snapshot.

    Returns the number of partitions rewritten. The engine reads the current rows of those
    partitions and replaces them with `overwritePartitions()` (dynamic overwrite: every other
    partition is left as it is); one task writes them, so each partition becomes one file
    (shuffling by the source column would not do: a `truncate` or `days` partition holds
    several source values, which would land in several tasks and files). A table with delete
    files is rewritten whole, the same way, by `INSERT OVERWRITE`.
    """
    if delete_files(table):
        view = "lake_compaction"
        spark.table(engine_name).coalesce(1).createOrReplaceTempView(view)
        spark.sql(f"INSERT OVERWRITE {engine_name} SELECT * FROM {view}").collect()
        return len({repr(sorted((f.get("partition") or {}).items())) for f in data_files(table)})
    partitions = small_file_partitions(table, small_bytes, min_files)
    if not partitions:
        return 0
    conditions = [partition_condition(table, p) for p in partitions]
    frame = spark.table(engine_name)
    if all(c is not None for c in conditions) and table.spec().fields:
        frame = frame.where(" OR ".join(f"({c})" for c, _ in conditions))
    frame.coalesce(1).writeTo(engine_name).overwritePartitions()
    return len(partitions)
