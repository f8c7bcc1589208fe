"""The insurance domain's assets: the raw drops (observed) and the curated Delta tables."""

import hashlib

import dagster as dg

from lake_assets.insurance.contract import QUARANTINE_TABLE, TABLE, table_columns
from lake_assets.core.lock import LockOwner, table_lock
from lake_assets.insurance.pipeline import STAGING, ApplyReport, IngestRules, apply_pending
from lake_assets.insurance.raw_zone import RAW_CDC, RAW_FULLLOAD
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.rules import LakeRules
from lake_assets.runs import record_process
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.core.formats.delta import open_table, row_count
from lake_assets.core.tables import INSURANCE, INSURANCE_CHANGES, INSURANCE_HISTORY, INSURANCE_QUARANTINE

OWNERS = ["team:data-engineering"]
RAW_FULLLOAD_KEY = dg.AssetKey(["raw", "insurance_fullload"])
RAW_CDC_KEY = dg.AssetKey(["raw", "insurance_cdc"])


def _observe(storage: StorageResource, prefix: str) -> dg.ObserveResult:
    with storage.running() as running:
        objects = running.list_objects(prefix)
    fingerprint = hashlib.sha256("".join(f"{o['Key']}@{o['ETag']}" for o in objects).encode()).hexdigest()
    return dg.ObserveResult(
        data_version=dg.DataVersion(fingerprint[:16]),
        metadata={"objects": len(objects), "bytes": sum(int(o["Size"]) for o in objects),
                  "latest_object": objects[-1]["Key"] if objects else ""},
    )


# Dagster 1.13's observable_source_asset has no `owners` parameter: its **kwargs takes `owners=` and drops it
# (so mypy finds no matching overload). Kept, as on every other asset of the domain, for when Dagster takes it.
@dg.observable_source_asset(  # type: ignore[call-overload]
    key=RAW_FULLLOAD_KEY, group_name="raw", owners=OWNERS,
    description=f"Full-load CSV snapshots of the policy system (with header) under s3://<bucket>/{RAW_FULLLOAD}.",
)
def raw_insurance_fullload(storage: StorageResource) -> dg.ObserveResult:
    return _observe(storage, RAW_FULLLOAD)


# Dagster 1.13's observable_source_asset has no `owners` parameter: its **kwargs takes `owners=` and drops it
# (so mypy finds no matching overload). Kept, as on every other asset of the domain, for when Dagster takes it.
@dg.observable_source_asset(  # type: ignore[call-overload]
    key=RAW_CDC_KEY, group_name="raw", owners=OWNERS,
    description=f"AWS DMS style CDC files (no header, operation I/U/D first) under s3://<bucket>/{RAW_CDC}.",
)
def raw_insurance_cdc(storage: StorageResource) -> dg.ObserveResult:
    return _observe(storage, RAW_CDC)


class ApplyConfig(dg.Config):
    reapply: bool = False  # also apply again the files `lake restore` reverted (`lake run --reapply`)


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            TABLE, deps=[RAW_FULLLOAD_KEY, RAW_CDC_KEY], group_name="insurance", owners=OWNERS,
            kinds={"delta", "spark", "s3"},
            description="Curated insurance policies: full-load snapshots and CDC changes (I/U upsert, "
                        "D delete) applied per key in sequence order, with audit columns; a suspicious "
                        "snapshot is held for `lake approve`.",
        ),
        dg.AssetSpec(
            QUARANTINE_TABLE, deps=[RAW_FULLLOAD_KEY, RAW_CDC_KEY], group_name="insurance", owners=OWNERS,
            kinds={"delta", "s3"},
            description="Every raw row that could not be applied: reason, source file, line number, raw text.",
        ),
        dg.AssetSpec(
            INSURANCE_CHANGES.name, deps=[TABLE], group_name="insurance", owners=OWNERS, kinds={"delta", "s3"},
            description="Change feed of `insurance` (Delta CDF semantics): the table's columns plus `_change_type` "
                        "(insert, update_preimage, update_postimage, delete), `_commit_version`, "
                        "`_commit_timestamp`; a run's commit writes it from the rows the apply replaced and wrote, "
                        "any other data-changing commit has it derived from the Delta log. "
                        "Read it with `lake changes insurance --from-version N`.",
        ),
        dg.AssetSpec(
            INSURANCE_HISTORY.name, deps=[TABLE], group_name="insurance", owners=OWNERS,
            kinds={"delta", "s3"},
            description="SCD type 2 history of `insurance` on the source's sequence axis (DLT's `STORED AS SCD "
                        "TYPE 2`): one row per version a policy had, valid from its `_sequence` to the key's next "
                        "change (`valid_to_sequence`; `valid_from`/`valid_to` their times), deletes as rows of "
                        "their own (`_operation = 'D'`), `is_current` for the live row, `commit_version` of the "
                        "run that recorded it; written from the apply's own changes.",
        ),
    ],
    can_subset=False,
)
def insurance_tables(context: dg.AssetExecutionContext, config: ApplyConfig, storage: StorageResource,
                     engine: SparkEngine, rules: LakeRules):
    """Apply every pending raw object to `insurance` (and its quarantine), then record the ledger.

    The whole apply runs under the table's write lock, so what is pending is decided by the
    one writer that holds it: a second run waits, then finds the first run's files applied.
    """
    record_process(context.instance, context.run.run_id)  # so reap_dead_runs can fail the run if we are killed
    with storage.running() as running, \
            table_lock(running, TABLE, owner=LockOwner.current(context.run.run_id)) as lease:
        running.delete_prefix(STAGING)  # Parquet staged by a killed run: nobody else stages under the lock
        report = apply_pending(running, engine.session(running), context.run.run_id,
                               IngestRules.from_rules(rules), reapply=config.reapply)
        lease.check()
        changes_metadata, history_metadata = derived_metadata(report, running)
    for held in report.held:
        context.log.warning(f"full load {held.source_file} is held for `lake approve`: {held.detail}")
    context.log.info(
        f"applied {len(report.files)} file(s): version {report.version_before} -> {report.version_after}, "
        f"{report.rows_before} -> {report.rows_after} rows"
    )
    yield dg.MaterializeResult(asset_key=TABLE, metadata=insurance_metadata(report, running))
    yield dg.MaterializeResult(asset_key=QUARANTINE_TABLE, metadata={
        "rows_quarantined": report.file_total("rows_quarantined"),
        "source_files": dg.MetadataValue.json([f.source_file for f in report.files if f.rows_quarantined]),
        "table_uri": INSURANCE_QUARANTINE.uri(running),
    })
    yield dg.MaterializeResult(asset_key=INSURANCE_CHANGES.name, metadata=changes_metadata)
    yield dg.MaterializeResult(asset_key=INSURANCE_HISTORY.name, metadata=history_metadata)


def derived_metadata(report: ApplyReport, storage: LakeStorage) -> tuple[dict, dict]:
    """Metadata of `insurance_changes` (after the run's catch-ups) and `insurance_history` (the run's write)."""
    feed, history = report.derived.feed, report.derived.history
    changes, scd2 = open_table(storage, INSURANCE_CHANGES), open_table(storage, INSURANCE_HISTORY)
    return {
        "versions_derived": dg.MetadataValue.json(feed.versions),
        "covered_through_version": feed.covered_through if feed.covered_through is not None else -1,
        **{f"rows_{change}": count for change, count in feed.rows.items()},
        "dagster/row_count": row_count(changes) if changes else 0,
        "table_uri": INSURANCE_CHANGES.uri(storage),
    }, {
        "changes_recorded": history.changes,
        "keys_rewritten": history.keys,
        "history_version": history.version if history.version is not None else -1,
        "dagster/row_count": row_count(scd2) if scd2 else 0,
        "table_uri": INSURANCE_HISTORY.uri(storage),
    }


def insurance_metadata(report: ApplyReport, storage: LakeStorage) -> dict:
    return {
        "delta_version": report.version_after if report.version_after is not None else -1,
        "delta_version_before": report.version_before if report.version_before is not None else -1,
        "rows_before": report.rows_before,
        "rows_after": report.rows_after,
        "dagster/row_count": report.rows_after,
        "rows_inserted": report.total("inserted"),
        "rows_updated": report.total("updated"),
        "rows_deleted": report.total("deleted"),
        "rows_quarantined": report.file_total("rows_quarantined"),
        "rows_superseded": report.file_total("rows_superseded"),
        "commits": dg.MetadataValue.json([vars(c) for c in report.commits]),
        "source_files": dg.MetadataValue.json([
            {"file": f.source_file, "status": f.status, "rows": f.rows_in_file, "applied": f.rows_applied,
             "superseded": f.rows_superseded, "quarantined": f.rows_quarantined, "version": f.table_version,
             "detail": f.detail}
            for f in report.files
        ]),
        "held_files": dg.MetadataValue.json([{"file": f.source_file, "reason": f.detail} for f in report.held]),
        "duration_seconds": round(report.duration_seconds, 3),
        "dagster/column_schema": dg.TableSchema(
            columns=[dg.TableColumn(c.name, c.sql_type.lower(), description=c.description) for c in table_columns()]
        ),
        "table_uri": INSURANCE.uri(storage),
    }
