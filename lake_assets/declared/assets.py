"""A declared table's assets: its raw drops (observed) and the tables the change core writes.

Made from the declaration alone (`raw_assets`, `table_assets`): the raw sources (one per
source prefix), and one multi-asset for the table, its quarantine, its change feed and its
SCD2 history, which one run of the core (core/apply/run.py) writes together under the table's
write lease.
"""

import hashlib
from collections.abc import Iterator

import dagster as dg

from lake_assets.core.apply.bookkeeping import tombstone_fields
from lake_assets.core.apply.run import ApplyReport, IngestRules, apply_pending
from lake_assets.core.tables import LEDGER, LakeTable, TableFormat, table_set
from lake_assets.core.declaration import Column, DayValues, RefusalReason, SourceKind, TableDeclaration
from lake_assets.core.ledger_states import REJECTED
from lake_assets.core.formats.delta import open_table, row_count
from lake_assets.core.lock import LockOwner, table_lock
from lake_assets.core.apply.resolve import AUDIT_TYPES, table_columns
from lake_assets.core.column_descriptions import (
    AUDIT_DESCRIPTIONS,
    FEED_COLUMNS,
    HISTORY_COLUMNS,
    QUARANTINE_DESCRIPTIONS,
    column_descriptions,
)
from lake_assets.core.quarantine import QUARANTINE_COLUMNS
from lake_assets.core.registry import RAW_ASSETS
from lake_assets.core.run_outcome import RunOutcome
from lake_assets.declared.keys import asset_key
from lake_assets.declared.partitions import partitions_def, record_partitions, reloads
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.rules import LakeRules
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.runs import record_process
from lake_assets.settings import RulesSettings

#: A source's name in its raw asset's key (`raw/insurance_fullload`): what users call these drops.
SOURCE_NAMES = {SourceKind.SNAPSHOT: "fullload", SourceKind.CDC: "cdc"}
_KINDS = {SourceKind.SNAPSHOT: "full-load CSV snapshots (DMS style, header optional)",
          SourceKind.CDC: "AWS DMS style CDC files (no header, the operation I/U/D first)"}


def raw_key(declaration: TableDeclaration, kind: SourceKind) -> dg.AssetKey:
    return dg.AssetKey([RAW_ASSETS, f"{declaration.name}_{SOURCE_NAMES[kind]}"])


def raw_assets(declaration: TableDeclaration) -> list[dg.SourceAsset]:
    """One observable source asset per source prefix: the objects landed there."""
    return [_raw_asset(declaration, source.kind, source.prefix) for source in declaration.sources]


def _raw_asset(declaration: TableDeclaration, kind: SourceKind, prefix: str) -> dg.SourceAsset:
    # Dagster 1.13's observable_source_asset takes no `owners` (its **kwargs drop it): the owners
    # are on the table's assets.
    @dg.observable_source_asset(key=raw_key(declaration, kind), group_name=RAW_ASSETS,
                                description=f"{_KINDS[kind]} of `{declaration.name}` under s3://&lt;bucket&gt;/"
                                            f"{prefix}.")
    def observe(storage: StorageResource) -> dg.ObserveResult:
        with storage.running() as running:
            objects = running.list_objects(prefix)
        fingerprint = hashlib.sha256("".join(f"{o['Key']}@{o['ETag']}" for o in objects).encode()).hexdigest()
        return dg.ObserveResult(data_version=dg.DataVersion(fingerprint[:16]), metadata={
            "objects": len(objects), "bytes": sum(int(o["Size"]) for o in objects),
            "latest_object": objects[-1]["Key"] if objects else ""})
    return observe


class ApplyConfig(dg.Config):
    reapply: bool = False  # also apply again the files `lake restore` reverted (`lake run --reapply`)
    # applied snapshot objects to load again, as of the stamps they were applied with (`lake backfill`)
    reload: list[str] = []


def table_description(declaration: TableDeclaration) -> str:
    """The table asset's description: what its sources deliver and how it is kept."""
    kinds = {s.kind for s in declaration.sources}
    inputs = " and ".join(words for kind, words in ((SourceKind.SNAPSHOT, "full-load snapshots"),
                                                    (SourceKind.CDC, "CDC changes")) if kind in kinds)
    parts = [f"{declaration.description}: {inputs} applied per key in sequence order, with audit columns"
             + ("; a suspicious snapshot is held for `lake approve`." if SourceKind.SNAPSHOT in kinds else ".")]
    if declaration.partition_by:
        parts.append(f"Partitioned by {', '.join(declaration.partition_by)}.")
    column, daily = declaration.partition_snapshots, declaration.daily_partitions
    if column:
        here = "each value is a partition here too" if daily is None else \
            (f"each day from {daily.start} to {daily.end or 'today'} is a partition here (daily"
             + (f", named by its Julian day number in {column}" if daily.values is DayValues.JULIAN_DAY else "") + ")")
        parts.append(f"Each snapshot object replaces one {column} partition, named by its folder ({column}=&lt;value&gt;/); "
                     f"{here}: materializing partitions loads their newest snapshots again, as `lake backfill "
                     "--partition` does.")
    table = table_set(declaration).table
    if table.format is TableFormat.ICEBERG:
        parts.append(f"An Iceberg table in the catalog: `{table.name}` in `lake query`, its changes read from its "
                     f"snapshots (`lake changes {table.name}`).")
    return " ".join(parts)


def table_assets(declaration: TableDeclaration) -> dg.AssetsDefinition:
    """The multi-asset that applies everything pending to the table (and writes what it keeps beside)."""
    tables = table_set(declaration)
    raw = [raw_key(declaration, s.kind) for s in declaration.sources]
    owners = list(declaration.owners)
    name = declaration.name
    partitions = partitions_def(declaration)  # the table's own: its quarantine, history and the rest are whole
    # What the tables kept beside the table are drawn from in the lineage: the table; for a partitioned
    # one, its raw sources (in a run not started for partitions, Dagster cannot read the version of
    # a partitioned input of the step: it asks the run for its partitions)
    beside = raw if partitions else [asset_key(tables.table)]
    specs = [
        dg.AssetSpec(asset_key(tables.table), deps=raw, group_name=declaration.group, owners=owners,
                     kinds={declaration.format.value, "spark", "s3"}, partitions_def=partitions,
                     description=table_description(declaration),
                     metadata={"dagster/column_schema": column_schema(declaration),
                               **({"partition_by": ", ".join(declaration.partition_by)}
                                  if declaration.partition_by else {})}),
        dg.AssetSpec(asset_key(tables.quarantine), deps=raw, group_name=declaration.group, owners=owners,
                     kinds={"delta", "s3"},
                     description="Every raw row that could not be applied: reason, source file, line number, raw "
                                 "text. Each run's rows by reason are in its metadata (`quarantined_<reason>`, "
                                 "plotted over time).",
                     metadata={"dagster/column_schema": quarantine_schema()}),
        dg.AssetSpec(asset_key(tables.tombstones), deps=beside, group_name=declaration.group, owners=owners,
                     kinds={"delta", "s3"},
                     description=f"Keys deleted from `{name}`, the sequence of their delete and the object and "
                                 "line that deleted them, kept "
                                 + (f"for {declaration.tombstone_retention_days} days (by default)"
                                    if declaration.tombstone_retention_days is not None else "for good")
                                 + " so a late, older change cannot bring a deleted key back.",
                     metadata={"dagster/column_schema": tombstone_schema(declaration)}),
    ]
    if tables.table.feed:
        specs.append(dg.AssetSpec(
            asset_key(tables.changes), deps=beside, group_name=declaration.group, owners=owners, kinds={"delta", "s3"},
            description=f"Change feed of `{name}` (Delta CDF semantics): the table's columns plus `_change_type` "
                        "(insert, update_preimage, update_postimage, delete), `_commit_version`, `_commit_timestamp`. "
                        f"Read it with `lake changes {name} --from-version N`.",
            metadata={"dagster/column_schema": derived_schema(declaration, FEED_COLUMNS)}))
    if declaration.history:
        specs.append(dg.AssetSpec(
            asset_key(tables.history), deps=beside, group_name=declaration.group, owners=owners, kinds={"delta", "s3"},
            description=f"SCD type 2 history of `{name}` on the source's sequence axis (DLT's `STORED AS SCD TYPE "
                        "2`): one row per version a key had, valid from its `_sequence` to the key's next change "
                        "(`valid_to_sequence`; `valid_from`/`valid_to` their times), deletes as rows of their own "
                        "(`_operation = 'D'`), `is_current` for the live row, `commit_version` of the run that "
                        "recorded it.",
            metadata={"dagster/column_schema": derived_schema(declaration, HISTORY_COLUMNS)}))

    # A partitioned table's multi-asset can be subset: Dagster backfills the partitions of a selection
    # whose assets share them, so the UI's backfill selects the table alone. Its run writes the
    # whole tables beside it all the same, and reports them as materializations (`_reported`).
    @dg.multi_asset(name=f"{name}_tables", specs=specs, can_subset=partitions is not None,
                    backfill_policy=dg.BackfillPolicy.single_run() if partitions else None)
    def apply_tables(context: dg.AssetExecutionContext, config: ApplyConfig, storage: StorageResource,
                     engine: SparkEngine, rules: LakeRules):
        """Apply every pending raw object to the table (and its quarantine), then record the ledger.

        The whole apply runs under the table's write lease, so what is pending is decided by the
        one writer that holds it: a second run waits, then finds the first run's objects applied."""
        run_id = context.run.run_id
        record_process(context.instance, run_id)  # so reap_dead_runs can fail the run if we are killed
        with storage.running() as running, table_lock(running, tables.table.write_lock, owner=LockOwner.current(run_id)) as lease:
            reload = [*config.reload, *_partitions_asked(context, declaration, running)]
            job_run: dict = {}
            if engine.on_aws:  # the apply step as an AWS Glue / EMR Serverless job (lake_assets/aws/)
                from lake_assets.aws import apply_job_launcher

                outcome = apply_job_launcher()(context, engine.engine, engine.aws, declaration, running,
                                        RulesSettings(**rules.model_dump()), config.reapply, reload)
                report, job_run = outcome.report, dict(outcome.run_metadata)
            else:
                report = apply_pending(declaration, running, engine.session(running), run_id,
                                       IngestRules.from_rules(rules), reapply=config.reapply, reload=reload)
            lease.check()
            metadata = table_metadata(declaration, report, running)
            metadata[tables.table].update(job_run)
        record_partitions(context, declaration, report.files)
        for held in report.held:
            context.log.warning(f"full load {held.source_file} is held for `lake approve`: {held.detail}")
        context.log.info(f"applied {len(report.files)} file(s): version {report.version_before} -> "
                         f"{report.version_after}, {report.rows_before} -> {report.rows_after} rows")
        context.log_event(dg.AssetObservation(asset_key=LEDGER_KEY, metadata=ledger_metadata(declaration, report,
                                                                                              running)))
        yield from _reported(context, metadata)

    return apply_tables


def _reported(context: dg.AssetExecutionContext, metadata: dict[LakeTable, dict]) -> Iterator[dg.MaterializeResult]:
    """What the run wrote, each table with its metadata: the selected ones as the step's results,
    any other (a partition backfill selects the table alone) as a materialization logged beside."""
    for table, values in metadata.items():
        key = asset_key(table)
        if key in context.selected_asset_keys:
            yield dg.MaterializeResult(asset_key=key, metadata=values)
        else:
            context.log_event(dg.AssetMaterialization(asset_key=key, metadata=values))


def _partitions_asked(context: dg.AssetExecutionContext, declaration: TableDeclaration,
                      storage: LakeStorage) -> list[str]:
    """The objects a run started for partitions loads again (declared/partitions.py): none for a
    run started without any (the sensor's, `lake run`'s)."""
    if not (context.has_partition_key or context.has_partition_key_range):
        return []
    keys = list(context.partition_keys)
    objects, missing = reloads(declaration, storage, keys)
    if missing:
        context.log.warning(f"{len(missing)} of the run's {len(keys)} partition(s) have no applied snapshot to load "
                            f"again: {', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}")
    context.log.info(f"loading {len(objects)} object(s) of {len(keys)} partition(s) again, each as of its own stamp")
    return objects


def column_schema(declaration: TableDeclaration) -> dg.TableSchema:
    """The table's columns with their types, descriptions and declared rules (the UI's column
    table shows the rules as constraints; the audit columns are described too)."""
    described = {c.name: c for c in declaration.columns}
    columns = []
    for name in table_columns(declaration):
        column = described.get(name)
        if column is not None:
            columns.append(dg.TableColumn(name, column.type.lower(), description=column.description,
                                          constraints=_constraints(declaration, column)))
        else:
            columns.append(dg.TableColumn(name, AUDIT_TYPES[name], description=AUDIT_DESCRIPTIONS[name]))
    return dg.TableSchema(columns=columns)


def derived_schema(declaration: TableDeclaration, added: dict[str, tuple[str, str]]) -> dg.TableSchema:
    """A change feed's or history's columns: the table's, then the `added` ones (name -> type, description).
    Without the table's constraints: a key has many rows here, and a delete's row holds only its key."""
    return dg.TableSchema(columns=[*(dg.TableColumn(c.name, c.type, description=c.description)
                                     for c in column_schema(declaration).columns),
                                   *(dg.TableColumn(name, kind, description=description)
                                     for name, (kind, description) in added.items())])


def quarantine_schema() -> dg.TableSchema:
    """Every quarantine's columns (core/quarantine.py writes them)."""
    return dg.TableSchema(columns=[dg.TableColumn(name, kind.lower(), description=QUARANTINE_DESCRIPTIONS[name])
                                   for name, _, kind in QUARANTINE_COLUMNS])


def tombstone_schema(declaration: TableDeclaration) -> dg.TableSchema:
    """The tombstones' columns, described (bookkeeping.py writes them)."""
    described = column_descriptions(table_set(declaration).tombstones.name)
    return dg.TableSchema(columns=[dg.TableColumn(column, kind.lower(),
                                                  description=described.get(column, f"A deleted key's {column}"))
                                   for column, kind in tombstone_fields(declaration.key_types)])


def _constraints(declaration: TableDeclaration, column: Column) -> dg.TableColumnConstraints:
    """What the declaration lets a value of `column` be; a refused value is quarantined."""
    rules = []
    if column.allowed:
        rules.append(f"one of {', '.join(column.allowed)}")
    if column.pattern is not None:
        rules.append(f"matches {column.pattern}")
    if column.minimum is not None:
        rules.append(f">= {column.minimum}")
    key = declaration.keys == (column.name,)
    return dg.TableColumnConstraints(nullable=column.nullable and column.name not in declaration.keys, unique=key,
                                     other=rules)


#: The ingestion ledger, an asset of its own: every declared table's run records its objects there
#: and logs an observation of it with what the run did (`ledger_metadata`).
LEDGER_KEY = asset_key(LEDGER)
LEDGER_ASSET = dg.AssetSpec(
    LEDGER_KEY, group_name="lake", kinds={"delta", "s3"},
    description="The ingestion ledger: one entry per raw object a run took in (applied, refused, held, "
                "approved, reverted), with its rows applied, superseded and quarantined and why. Each apply run "
                "logs an observation here: `<table>_files_applied`, `<table>_rows_quarantined`, ... (plotted per "
                "table over time). `lake status` reads it; `lake query \"SELECT * FROM lake_ledger\"` too.")


def quarantine_by_reason(report: ApplyReport) -> dict[str, int]:
    """The run's quarantined rows per reason, one numeric entry each (`quarantined_<reason>`), so the
    UI plots each reason over the runs; every reason appears, 0 when the run had none."""
    return {f"quarantined_{reason.value}": report.quarantined_by_reason.get(reason.value, 0)
            for reason in RefusalReason} | {f"quarantined_{reason}": count
                                             for reason, count in report.quarantined_by_reason.items()}


def ledger_metadata(declaration: TableDeclaration, report: ApplyReport, storage: LakeStorage) -> dict[str, str | int]:
    """The observation of the ledger one run of `declaration`'s table logs: what it did, per table."""
    outcome = RunOutcome.of_files(report.files)
    return {"table": declaration.name,
            **{f"{declaration.name}_{key}": value for key, value in outcome.as_metadata().items()},
            "dagster/row_count": _rows(storage, LEDGER)}


def _rows(storage: LakeStorage, table: LakeTable) -> int:
    """The rows a Delta table holds, from its log (0 before it exists)."""
    found = open_table(storage, table)
    return row_count(found) if found is not None else 0


def table_metadata(declaration: TableDeclaration, report: ApplyReport, storage: LakeStorage) -> dict[LakeTable, dict]:
    """Each asset's materialization metadata from one run's report."""
    tables = table_set(declaration)
    iceberg = tables.table.format is TableFormat.ICEBERG
    version = "snapshot_id" if iceberg else "delta_version"
    metadata: dict[LakeTable, dict] = {tables.table: {
        version: report.version_after if report.version_after is not None else -1,
        f"{version}_before": report.version_before if report.version_before is not None else -1,
        "rows_before": report.rows_before,
        "rows_after": report.rows_after,
        "dagster/row_count": report.rows_after,
        "rows_inserted": report.total("inserted"),
        "rows_updated": report.total("updated"),
        "rows_deleted": report.total("deleted"),
        **RunOutcome.of_files(report.files).as_metadata(),  # files applied/refused/held, rows applied/...
        "commits": dg.MetadataValue.json([vars(c) for c in report.commits]),
        "source_files": dg.MetadataValue.json([
            {"file": f.source_file, "status": f.status, "rows": f.rows_in_file, "applied": f.rows_applied,
             "superseded": f.rows_superseded, "quarantined": f.rows_quarantined, "version": f.table_version,
             "detail": f.detail} for f in report.files]),
        "held_files": dg.MetadataValue.json([{"file": f.source_file, "reason": f.detail} for f in report.held]),
        "duration_seconds": round(report.duration_seconds, 3),
        "dagster/column_schema": column_schema(declaration),
        **({"iceberg_table": tables.table.engine_name} if iceberg else {"table_uri": tables.table.uri(storage)}),
        **{f"expectation_{name}_failed_rows": failed for name, failed in report.expectations.items()},
    }, tables.quarantine: {
        "rows_quarantined": report.file_total("rows_quarantined"),
        **quarantine_by_reason(report),
        "source_files": dg.MetadataValue.json([f.source_file for f in report.files if f.rows_quarantined]),
        "refused_files": dg.MetadataValue.json([{"file": f.source_file, "reason": f.detail} for f in report.files
                                                if f.status == REJECTED]),
        "dagster/row_count": _rows(storage, tables.quarantine),
        "table_uri": tables.quarantine.uri(storage),
    }, tables.tombstones: {
        "dagster/row_count": _rows(storage, tables.tombstones),
        "table_uri": tables.tombstones.uri(storage),
    }}
    if tables.table.feed:
        feed = report.derived.feed
        changes = open_table(storage, tables.changes)
        metadata[tables.changes] = {
            "versions_derived": dg.MetadataValue.json(feed.versions),
            "covered_through_version": feed.covered_through if feed.covered_through is not None else -1,
            **{f"rows_{change}": count for change, count in feed.rows.items()},
            "dagster/row_count": row_count(changes) if changes else 0,
            "table_uri": tables.changes.uri(storage),
        }
    if declaration.history:
        history = open_table(storage, tables.history)
        metadata[tables.history] = {
            "changes_recorded": report.derived.history_changes,
            "history_version": report.derived.history_version if report.derived.history_version is not None else -1,
            "dagster/row_count": row_count(history) if history else 0,
            "table_uri": tables.history.uri(storage),
        }
    return metadata


