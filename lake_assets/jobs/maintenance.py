"""Nightly maintenance of every registered table, dispatching on its format.

- Delta (delta-rs): compact small files, then vacuum old ones. A table clustered by a key
  (`cluster_by`: `insurance` and `insurance_history` by `policy_id`, so a CDC batch rewrites
  only the files holding its keys, see core/apply/commit.py and core/apply/history.py) is compacted by sorting on that key (`z_order` of one
  column is a sort) into files of the writer's target size, and only when its files' key
  ranges overlap or small files piled up; otherwise it is left as it is. Vacuum's
  retention is the time-travel window (`LAKE_TIME_TRAVEL_HOURS`, default a week): every
  version current at some moment inside the window keeps its files, so `lake query
  --version/--as-of` inside it always works (and says so clearly outside it,
  core/formats/delta.py). A retention below the window is refused. Before a table with a
  change feed is vacuumed, the feed stores its version 0 if the files that version is
  answered from are no longer current (core/change_feed.py). Files, bytes and versions
  before and after go into the run's metadata.
- Iceberg (pyiceberg + the engine, core/formats/iceberg_maintenance.py): compact each
  partition holding two or more small files into one (under the table's write lock, so no
  load commits between its read and its overwrite), expire snapshots older than the retention window
  (keeping the newest), then remove the files nothing references any more (older than a
  grace period). Files, bytes and snapshots before and after go into the run's metadata.
"""

import datetime as dt

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from lake_assets.core import change_feed
from lake_assets.core.apply.cluster import TARGET_FILE_BYTES
from lake_assets.core.errors import UsageError
from lake_assets.core.formats import iceberg, iceberg_maintenance
from lake_assets.core.history import feed_of
from lake_assets.core.formats.delta import WINDOW_SETTING, file_ranges, open_table, window_start
from lake_assets.core.lock import DEFAULT_WAIT_SECONDS, LockOwner, table_lock
from lake_assets.core.apply.stage import Stage
from lake_assets.core.tables import TABLES, LakeTable, TableFormat
from lake_assets.core.registry import declarations
from lake_assets.core.tables import table_set
from lake_assets.runs import TABLE_TAG
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.rules import LakeRules
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.runs import record_process

SNAPSHOT_RETENTION_HOURS = 168
#: Tables kept clustered by a key, and the size of the files their writers aim at.


def cluster_by() -> dict[str, tuple[str, int]]:
    """Tables kept clustered by a key (every declared table's, and its history, with an integer
    first key), and the size of the files their writers aim at. A partitioned table is not: its
    files of one key range span its partitions, so it is compacted within each partition."""
    return {table.name: (d.keys[0], TARGET_FILE_BYTES) for d in declarations() if d.column(d.keys[0]).is_integer
            for table in ((table_set(d).table,) if not d.partition_by else ()) + (table_set(d).history,)}


class MaintenanceConfig(dg.Config):
    retention_hours: int | None = None  # vacuum retention; unset: the time-travel window (never less)
    lock_wait_seconds: float = DEFAULT_WAIT_SECONDS  # how long to wait for a run writing the table


class IcebergMaintenanceConfig(dg.Config):
    snapshot_retention_hours: int = SNAPSHOT_RETENTION_HOURS
    retain_last: int = 1
    orphan_grace_hours: float = iceberg_maintenance.ORPHAN_GRACE.total_seconds() / 3600
    compact_min_files: int = iceberg_maintenance.MIN_FILES_TO_COMPACT
    lock_wait_seconds: float = DEFAULT_WAIT_SECONDS  # how long to wait for a run writing the table


@dg.op(description="optimize.compact() and vacuum() every curated Delta table.")
def compact_and_vacuum(context: dg.OpExecutionContext, config: MaintenanceConfig, storage: StorageResource,
                       rules: LakeRules) -> None:
    record_process(context.instance, context.run_id)  # so reap_dead_runs can fail the run if we are killed
    retention = vacuum_retention(config.retention_hours, rules.time_travel_hours)
    with storage.running() as running:
        _maintain(context, config, running, retention)


def vacuum_retention(configured: int | None, window_hours: int) -> int:
    """The vacuum retention in hours: the time-travel window, or a longer configured one."""
    if configured is None:
        return window_hours
    if configured < window_hours:
        raise UsageError(f"retention_hours={configured} is below the time-travel window {WINDOW_SETTING}="
                         f"{window_hours} h: vacuum would remove files that versions inside it need "
                         f"(lower {WINDOW_SETTING} instead)")
    return configured


def _maintain(context: dg.OpExecutionContext, config: MaintenanceConfig, storage: LakeStorage,
              retention_hours: int) -> None:
    owner = LockOwner.current(context.run_id)
    metadata = {}
    for table in (t for t in TABLES.values() if t.format is TableFormat.DELTA):
        with table_lock(storage, table.write_lock, owner=owner,
                        wait_seconds=config.lock_wait_seconds):
            maintained = _maintain_table(context, storage, table, retention_hours)
        if maintained:
            metadata[table.name] = maintained
    context.add_output_metadata({"retention_hours": retention_hours, **metadata})


def _maintain_table(context: dg.OpExecutionContext, storage: LakeStorage, table: LakeTable,
                    retention_hours: int) -> dict | None:
    """Compact and vacuum one table while its writers are locked out; what was done, or None."""
    delta = open_table(storage, table)
    if delta is None:
        return None
    before = delta_stats(storage, table, delta, retention_hours)
    compacted = _compact(delta, table)
    feed = feed_of(table)
    if feed is not None:  # the feed of version 0 is its files: stored before a vacuum can take them
        change_feed.keep_first_version(storage, table, feed.table, feed.key)
    # our own check (vacuum_retention) replaces delta-rs's, which knows only the table's default week
    removed = delta.vacuum(retention_hours=retention_hours, dry_run=False, enforce_retention_duration=False)
    after = delta_stats(storage, table, open_table(storage, table), retention_hours)
    context.log.info(f"{table.name}: compacted {compacted['numFilesRemoved']} files into "
                     f"{compacted['numFilesAdded']}, vacuumed {len(removed)}; stored files {before['stored_files']} "
                     f"-> {after['stored_files']}, readable versions from {after['oldest_readable_version']}")
    return {"files_compacted": compacted["numFilesRemoved"], "files_vacuumed": len(removed),
            "before": before, "after": after}


def delta_stats(storage: LakeStorage, table: LakeTable, delta: DeltaTable, retention_hours: int) -> dict[str, int]:
    """Files and bytes of the current version and in storage, and the versions time travel reaches."""
    actions = pa.table(delta.get_add_actions(flatten=True))
    stored = [o for o in storage.list_objects(f"{table.prefix}/") if "/_delta_log/" not in o["Key"]]
    return {
        "files": actions.num_rows,
        "bytes": int(pc.sum(actions["size_bytes"]).as_py() or 0) if actions.num_rows else 0,
        "stored_files": len(stored),
        "stored_bytes": sum(int(o["Size"]) for o in stored),
        "version": delta.version(),
        "oldest_readable_version": window_start(delta, dt.timedelta(hours=retention_hours)),
    }


def _compact(delta, table: LakeTable) -> dict:  # deltalake.DeltaTable
    """Bin-pack small files; for a clustered table, re-sort by its key where the layout needs it."""
    if table.name not in cluster_by():
        return delta.optimize.compact()
    key, target = cluster_by()[table.name]
    mins, maxs, _ = file_ranges(delta, key)
    sizes = np.asarray(pa.table(delta.get_add_actions(flatten=True))["size_bytes"], np.int64)
    if not needs_clustering(mins, maxs, sizes, target):
        return {"numFilesRemoved": 0, "numFilesAdded": 0}
    return delta.optimize.z_order([key], target_size=target)


def needs_clustering(mins: np.ndarray, maxs: np.ndarray, sizes: np.ndarray, target_bytes: int) -> bool:
    """Whether some files' key ranges overlap, or more than one file is under half the target size."""
    if len(mins) < 2:
        return False
    order = mins.argsort(kind="stable")
    reach = np.maximum.accumulate(maxs[order])
    return bool((mins[order][1:] <= reach[:-1]).any()) or int((sizes < target_bytes // 2).sum()) > 1


@dg.op(description="Compact, expire snapshots and remove orphan files of every Iceberg table.")
def maintain_iceberg(context: dg.OpExecutionContext, config: IcebergMaintenanceConfig, storage: StorageResource,
                     engine: SparkEngine) -> None:
    owner = LockOwner.current(context.run_id)
    with storage.running() as running:
        now = dt.datetime.now(dt.timezone.utc)
        metadata = {}
        for table in (t for t in TABLES.values() if t.format is TableFormat.ICEBERG):
            handle = iceberg.open_table(running, table)
            if handle is None:
                continue
            before = iceberg_maintenance.table_stats(running, handle)
            # compaction replaces partitions with what it read: a load committing meanwhile would be lost;
            # under the lease, no run can stop between the check of stopped runs and the compaction
            with table_lock(running, table.write_lock, owner=owner, wait_seconds=config.lock_wait_seconds):
                waits = stopped_run_waits(running, table)
                partitions = 0 if waits else iceberg_maintenance.compact(
                    engine.session(running), iceberg.open_table(running, table), table.engine_name,
                    min_files=config.compact_min_files)
            if waits:
                context.log.warning(f"{table.name}: skipped; a run stopped after staging its commit waits for the "
                                    "table's next run to finish it (its commit is known by being the next snapshot)")
                continue
            handle = iceberg.open_table(running, table)
            expired = iceberg_maintenance.expire_snapshots(
                handle, now - dt.timedelta(hours=config.snapshot_retention_hours), config.retain_last)
            handle = iceberg.open_table(running, table)
            removed = iceberg_maintenance.remove_orphan_files(
                running, handle, now - dt.timedelta(hours=config.orphan_grace_hours))
            after = iceberg_maintenance.table_stats(running, iceberg.open_table(running, table))
            context.log.info(f"{table.name}: compacted {partitions} partition(s), expired {len(expired)} "
                             f"snapshot(s), removed {len(removed)} orphan file(s); data files "
                             f"{before.data_files} -> {after.data_files}, objects {before.objects} -> {after.objects}")
            metadata[table.name] = {
                "partitions_compacted": partitions, "snapshots_expired": len(expired), "orphans_removed": len(removed),
                "before": before.as_metadata(), "after": after.as_metadata()}
        context.add_output_metadata(metadata)


def stopped_run_waits(storage: LakeStorage, table: LakeTable) -> bool:
    """Whether a declared table's run was stopped between recording its manifest and its ledger:
    the next run finishes it, and tells whether its commit landed by the snapshot that follows
    the one it found (core/apply/curated_iceberg.py), which a compaction must not be."""
    return any(stage.manifest() is not None for stage in Stage.left_behind(storage, table.write_lock))


@dg.job(tags={TABLE_TAG: "maintenance"}, executor_def=dg.in_process_executor,
        description="Maintain every table by its format: Delta compact + vacuum; Iceberg compact, expire "
                    "snapshots, remove orphan files.")
def maintenance_job() -> None:
    compact_and_vacuum()
    maintain_iceberg()

