"""A declared table's Dagster partitions: one per value of its partition snapshot source's column.

A table fed by partition snapshots (`partition: <column>` on a snapshot source) is partitioned in
Dagster by that column's values (a `DynamicPartitionsDefinition`: the values come with the
objects). A partition's key is its value as `partition_text` writes it (a date as `2024-04-01`,
NULL as `__HIVE_DEFAULT_PARTITION__`). With `daily_partitions`, by day instead: a
`DailyPartitionsDefinition` over the declared calendar, each day's key `2024-04-01` whatever
value names it (the date, or its Julian day number); a value outside the calendar, or NULL, is
loaded as any other but is no Dagster partition.

Every run of the table's job registers the partitions whose snapshot it applied (dynamic ones)
and gives each its own materialization, with its objects and rows, so the UI shows when each
partition was last loaded and from what; a snapshot it held is an observation of its partition.
A run started for partitions (the UI's materialize or backfill of them: one run for a range,
`BackfillPolicy.single_run`) loads each one's newest applied snapshot again, as `lake backfill
--partition` does; runs started by the sensor and `lake run` are not partitioned and apply what
is pending, as for any table.
"""

import datetime as dt
from collections import defaultdict
from typing import Any

import dagster as dg

from lake_assets.core.apply.partitions import FolderPartition, folder_partition, partition_text
from lake_assets.core.apply.plan import applied_snapshots
from lake_assets.core.declaration import DailyPartitions, TableDeclaration
from lake_assets.core.ledger import LedgerEntry
from lake_assets.core.ledger_states import APPLIED, HELD
from lake_assets.declared.keys import table_key
from lake_assets.event_log import log_asset_events
from lake_assets.resources.storage import LakeStorage


def partitions_def(declaration: TableDeclaration) -> dg.PartitionsDefinition | None:
    """The table's Dagster partitions, or None for a table without a partition snapshot source."""
    column, daily = declaration.partition_snapshots, declaration.daily_partitions
    if column is None:
        return None
    if daily is None:
        return dg.DynamicPartitionsDefinition(name=f"{declaration.name}_{column}")
    return days_def(daily)


def days_def(daily: DailyPartitions) -> dg.DailyPartitionsDefinition:
    """A partition per day of the calendar `daily` declares."""
    # Dagster's end is exclusive; without one, the partitions run to today (end_offset=1 takes today in)
    end = None if daily.end is None else (daily.end + dt.timedelta(days=1)).isoformat()
    return dg.DailyPartitionsDefinition(start_date=daily.start.isoformat(), end_date=end,
                                        end_offset=0 if end else 1)


def partition_key(declaration: TableDeclaration, value: Any) -> str | None:
    """The Dagster partition key of a partition value: the value as text, or with daily partitions
    its day (None: a value that names no day of the calendar)."""
    daily = declaration.daily_partitions
    if daily is None:
        return partition_text(value)
    day = daily.day(value)
    return day.isoformat() if day is not None and daily.holds(day) else None


def reloads(declaration: TableDeclaration, storage: LakeStorage, keys: list[str]) -> tuple[list[str], list[str]]:
    """The objects a run for the partitions `keys` loads again (each partition's newest applied
    snapshot), and the keys that have none (nothing applied yet, or its object removed)."""
    found = {key: files for value, files in applied_snapshots(declaration, storage).items()
             if (key := partition_key(declaration, value)) is not None}
    return sorted(f.key for key in keys for f in found.get(key, [])), [key for key in keys if key not in found]


def by_partition(declaration: TableDeclaration, files: list[LedgerEntry], status: str) -> dict[str, list[LedgerEntry]]:
    """The run's ledger entries of `status` of partition snapshot objects, per partition key."""
    mine: dict[str, list[LedgerEntry]] = defaultdict(list)
    for entry in files:
        source = declaration.source(entry.source_file)
        if entry.status != status or source is None or source.partition is None:
            continue
        partition = folder_partition(declaration, source, entry.source_file)
        key = partition_key(declaration, partition.value) if isinstance(partition, FolderPartition) else None
        if key is not None:
            mine[key].append(entry)
    return dict(sorted(mine.items()))


def partition_counts(declaration: TableDeclaration, files: list[LedgerEntry]) -> dict[str, dict]:
    """Per partition whose snapshot the run applied (or loaded again): its objects, their rows and
    what became of them, from the run's ledger entries (named `partition_*`: beside the run's own
    counts, which a run for partitions gives each of its partitions too)."""
    return {key: {"partition_objects": len(entries),
                  "partition_rows_in_objects": sum(e.rows_in_file or 0 for e in entries),
                  **{f"partition_{count}": sum(getattr(e, count) for e in entries)
                     for count in ("rows_applied", "rows_superseded", "rows_quarantined")},
                  "partition_source_objects": dg.MetadataValue.json(sorted(e.source_file for e in entries))}
            for key, entries in by_partition(declaration, files, APPLIED).items()}


def record_partitions(context: dg.AssetExecutionContext, declaration: TableDeclaration,
                      files: list[LedgerEntry]) -> None:
    """Register the partitions the run loaded or held a snapshot of, and give each its counts: the
    run's own partitions on the materialization Dagster makes of each, any other as a
    materialization of its own; a held snapshot as an observation of its partition, with why."""
    definition = partitions_def(declaration)
    if definition is None:
        return
    counts = partition_counts(declaration, files)
    held = by_partition(declaration, files, HELD)
    if isinstance(definition, dg.DynamicPartitionsDefinition) and definition.name is not None:
        context.instance.add_dynamic_partitions(definition.name, sorted({*counts, *held}))
    own = set(context.partition_keys) if context.has_partition_key_range or context.has_partition_key else set()
    asset = table_key(declaration)
    for key in own & counts.keys():
        context.add_asset_metadata(counts[key], asset_key=asset, partition_key=key)
    # the others in one batch (a first load of a table of a partition per day logs hundreds)
    log_asset_events(context, [dg.AssetMaterialization(asset_key=asset, partition=key, metadata=values)
                               for key, values in counts.items() if key not in own])
    # a held snapshot is not loaded: its partition keeps what it had (or stays missing)
    log_asset_events(context, [dg.AssetObservation(asset_key=asset, partition=key, metadata={
        "held_objects": dg.MetadataValue.json([{"object": e.source_file, "reason": e.detail} for e in entries]),
        "publish_with": f"lake approve {entries[0].source_file}"}) for key, entries in held.items()])
