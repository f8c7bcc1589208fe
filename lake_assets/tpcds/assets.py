"""The TPC-DS domain's assets: the raw zone (observed), the Iceberg star, its quarantine.

`tpcds/web_sales` is partitioned by sold day over the generator's date range; a range of
days (a backfill, a sensor's batch of new days) loads in ONE run (`BackfillPolicy.single_run`)
and replaces exactly those days' partitions. The rows without a sold date ride along with
any run while their object is pending. Dimensions and corrections are unpartitioned and
apply what is pending. Objects `lake restore` reverted are pending only for a run whose
config says `reapply` (`lake run --reapply`); any other run, a backfill too, leaves a
reverted day out of the range it re-loads.
"""

import contextlib
import datetime as dt
import hashlib
from collections import Counter
from collections.abc import Iterator

import dagster as dg
from deltalake import DeltaTable

from lake_assets.core.column_descriptions import column_descriptions
from lake_assets.core.formats.delta import open_table as open_delta
from lake_assets.core.ledger import HELD, Ledger
from lake_assets.core.lock import LockOwner, table_lock
from lake_assets.declared.assets import column_schema
from lake_assets.declared.partitions import days_def
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.rules import LakeRules
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.runs import record_process
from lake_assets.tpcds.corrections import apply_corrections, pending_corrections
from lake_assets.tpcds.load import (
    LoadReport,
    day_guard,
    finish_report,
    load_dimension,
    load_fact_days,
    pending_dimensions,
    pending_fact_days,
    start_report,
)
from lake_assets.tpcds.layout import fact_layout
from lake_assets.tpcds.pending import reverted_days
from lake_assets.tpcds.schema import (
    ALL_QUARANTINES,
    CALENDAR,
    DECLARATIONS,
    DIMENSIONS,
    PARTITION_COLUMN,
    PARTITION_DAYS,
    RAW,
    TpcdsTable,
    ledger_name,
    table_columns,
)

GROUP = "tpcds"
OWNERS = ["team:data-engineering"]
RAW_TPCDS_KEY = dg.AssetKey(["raw", "tpcds"])
#: One partition per day of web_sales' calendar (schema.FIRST_DAY .. LAST_DAY), as its declaration says.
DAILY = days_def(CALENDAR)


class TpcdsLoadConfig(dg.Config):
    """Run config of the loading assets. The dimensions and the corrections take only new
    objects; web_sales re-loads every day of its run's range (a backfill: the UI's, `lake
    backfill`'s) unless `pending_only`."""

    reapply: bool = False  # also load again the objects `lake restore` reverted (`lake run --reapply`)
    # web_sales: only the days of the range whose object is new (the runs the sensor, the schedule and `lake run`
    # request: a range from the first to the last new day holds days loaded before, or loaded by another run since)
    pending_only: bool = False


def asset_key(name: str) -> dg.AssetKey:
    return dg.AssetKey(["tpcds", str(name)])


WEB_SALES_KEY = asset_key(TpcdsTable.WEB_SALES)
CORRECTIONS_KEY = asset_key("web_sales_corrections")
QUARANTINE_KEY = asset_key("tpcds_quarantine")
DIMENSION_KEYS = [asset_key(name) for name in DIMENSIONS]


# Dagster 1.13's observable_source_asset has no `owners` parameter: its **kwargs takes `owners=` and drops it
# (so mypy finds no matching overload). Kept, as on every other asset of the domain, for when Dagster takes it.
@dg.observable_source_asset(  # type: ignore[call-overload]
    key=RAW_TPCDS_KEY, group_name="raw", owners=OWNERS,
    description=f"TPC-DS deliveries under s3://<bucket>/{RAW.root}: dimension snapshots, one web_sales object "
                "per sold day, correction (CDC) files. `|`-separated text, no header.",
)
def raw_tpcds(storage: StorageResource) -> dg.ObserveResult:
    with storage.running() as running:
        objects = running.list_objects(RAW.root)
    fingerprint = hashlib.sha256("".join(f"{o['Key']}@{o['ETag']}" for o in objects).encode()).hexdigest()
    return dg.ObserveResult(data_version=dg.DataVersion(fingerprint[:16]),
                            metadata={"objects": len(objects), "bytes": sum(int(o["Size"]) for o in objects)})


#: What a load did with its objects, in `load_metadata`; web_sales gives each day's partition its own
#: (`day_metadata`) and the run's under `run_<key>`.
OBJECT_COUNTS = ("objects", "rows_in_objects", "rows_applied", "rows_superseded", "rows_quarantined")


def day_metadata(report: LoadReport, day_of: dict[str, dt.date], days: list[dt.date]) -> dict[dt.date, dict]:
    """Each day's own counts (its objects, their lines and rows applied, superseded, quarantined, held),
    from the run's ledger entries; `day_of` maps an object's key to its sold day."""
    own: dict[dt.date, dict] = {}
    for day in days:
        files = [f for f in report.files if day_of.get(f.source_file) == day]
        own[day] = {"objects": len(files),
                    "rows_in_objects": int(sum(f.rows_in_file or 0 for f in files)),
                    **{key: int(sum(getattr(f, key) for f in files))
                       for key in ("rows_applied", "rows_superseded", "rows_quarantined")},
                    "held": sum(f.status == HELD for f in files),
                    "source_objects": dg.MetadataValue.json(sorted(f.source_file for f in files))}
    return own


def load_metadata(report: LoadReport) -> dict:
    return {
        "iceberg_snapshot": report.snapshot_after if report.snapshot_after is not None else -1,
        "iceberg_snapshot_before": report.snapshot_before if report.snapshot_before is not None else -1,
        "rows_before": report.rows_before,
        "rows_after": report.rows_after,
        "dagster/row_count": report.rows_after,
        "objects": len(report.files),
        "rows_in_objects": report.total("rows_in_file"),
        "rows_applied": report.total("rows_applied"),
        "rows_superseded": report.total("rows_superseded"),
        "rows_quarantined": report.total("rows_quarantined"),
        "duration_seconds": round(report.duration_seconds, 3),
        "step_seconds": dg.MetadataValue.json(report.steps),
        "held_files": dg.MetadataValue.json([{"file": f.source_file, "reason": f.detail}
                                             for f in report.files if f.status == HELD]),
        "table": report.table,
    }


def _schema(name: str) -> dg.TableSchema:
    """The table's columns, typed and described as its declaration (lake_assets/tables/tpcds/) says
    (a dimension's as the change core writes it: with the audit columns)."""
    if name != TpcdsTable.WEB_SALES:
        return column_schema(DECLARATIONS[name])
    described = column_descriptions(ledger_name(name))
    return dg.TableSchema(columns=[dg.TableColumn(c, t.lower(), description=described.get(c))
                                   for c, t in table_columns(name)])


def _dimension_asset(name: str) -> dg.AssetsDefinition:
    @dg.asset(
        key=asset_key(name), group_name=GROUP, owners=OWNERS, deps=[RAW_TPCDS_KEY], kinds={"iceberg", "spark", "s3"},
        description=f"Iceberg table `{ledger_name(name)}`: each export {RAW.dimension_key(name)} upserted on its "
                    f"surrogate key in arrival order by the change core, as lake_assets/tables/tpcds/{name}.yaml "
                    f"declares; rejected lines in `{name}_quarantine`.",
        metadata={"dagster/column_schema": _schema(name), "dagster/table_name": ledger_name(name)},
    )
    def load(context: dg.AssetExecutionContext, config: TpcdsLoadConfig, storage: StorageResource,
             engine: SparkEngine) -> dg.MaterializeResult:
        with _writing(context, storage, ledger_name(name)) as running:
            if name in pending_dimensions(running, Ledger(running), config.reapply):
                report = load_dimension(running, engine.session(running), name, context.run.run_id, config.reapply)
            else:
                context.log.info(f"{ledger_name(name)}: no new snapshot pending")
                report = _nothing(running, name)
        return dg.MaterializeResult(metadata=load_metadata(report))

    return load


@contextlib.contextmanager
def _writing(context: dg.AssetExecutionContext, storage: StorageResource, table: str) -> Iterator[LakeStorage]:
    """The running storage with `table`'s write lease held (core/lock.py), as every writer of a
    table holds it: `lake run`, the daemon's runs and backfills never write one table at once."""
    record_process(context.instance, context.run.run_id)  # so reap_dead_runs can fail the run if we are killed
    with storage.running() as running, \
            table_lock(running, table, owner=LockOwner.current(context.run.run_id)) as lease:
        yield running
        lease.check()


def _nothing(storage: LakeStorage, name: str) -> LoadReport:
    return finish_report(storage, start_report(storage, ledger_name(name)), 0.0)


dimension_assets = [_dimension_asset(name) for name in DIMENSIONS]


def days_of(window: dg.TimeWindow) -> list[dt.date]:
    start, end = window.start.date(), window.end.date()
    return [start + dt.timedelta(days=i) for i in range((end - start).days)]


@dg.asset(
    key=WEB_SALES_KEY, group_name=GROUP, owners=OWNERS, deps=[RAW_TPCDS_KEY, *DIMENSION_KEYS],
    partitions_def=DAILY, backfill_policy=dg.BackfillPolicy.single_run(), kinds={"iceberg", "spark", "s3"},
    description=f"Iceberg table `tpcds.web_sales`, partitioned by truncate({PARTITION_COLUMN}, {PARTITION_DAYS}): "
                "each day's raw object is a snapshot of its day as of its sequence (one commit per run, any range of days: an "
                "append of new keys into days that hold no rows, else one merge-on-read MERGE, or one "
                "overwrite when the changes are a quarter of the rows): newer corrections survive a "
                "re-load. Rows without a sold date land too, whenever their object is pending. Rejected "
                "lines in `web_sales_quarantine`.",
    metadata={"dagster/column_schema": _schema(TpcdsTable.WEB_SALES), "dagster/table_name": "tpcds.web_sales"},
)
def web_sales(context: dg.AssetExecutionContext, config: TpcdsLoadConfig, storage: StorageResource,
              engine: SparkEngine, rules: LakeRules) -> dg.MaterializeResult:
    window: list[dt.date | None] = list(days_of(context.partition_time_window))
    with _writing(context, storage, ledger_name(TpcdsTable.WEB_SALES)) as running:
        ledger = Ledger(running)
        layout = fact_layout(running)  # one listing of the day objects for the whole step
        left = set() if config.reapply else reverted_days(running, ledger, layout.objects)  # `lake restore` took them out
        pending = set(pending_fact_days(running, ledger, config.reapply, layout.objects))
        days = [day for day in window if day not in left and (day in pending or not config.pending_only)]
        if None in pending:
            days.append(None)
        report = load_fact_days(running, engine.session(running), days, context.run.run_id, layout,
                                day_guard(rules.fullload_max_shrink))
    for entry in report.files:
        if entry.status == HELD:
            context.log.warning(f"{entry.source_file}: held ({entry.detail}); publish it with `lake approve`")
    context.log.info(f"web_sales: {len(report.files)} object(s) for {window[0]}..{window[-1]}"
                     + (f" ({len(left & set(window))} reverted day(s) left out)" if left & set(window) else "")
                     + f", {report.rows_before} -> {report.rows_after} rows")
    day_of = {obj.key: day for day, obj in layout.objects.items() if day is not None}
    for day, values in day_metadata(report, day_of, days_of(context.partition_time_window)).items():
        context.add_asset_metadata(values, partition_key=day.isoformat())  # each day's partition: its own counts
    run = load_metadata(report)  # the table's state after the run, for every day; the run's counts as run_<key>
    return dg.MaterializeResult(metadata={(f"run_{key}" if key in OBJECT_COUNTS else key): value
                                          for key, value in run.items()})


@dg.asset(
    key=CORRECTIONS_KEY, group_name=GROUP, owners=OWNERS, deps=[RAW_TPCDS_KEY, WEB_SALES_KEY],
    kinds={"iceberg", "spark"},
    description=f"Late corrections from {RAW.corrections} applied to `tpcds.web_sales` on (ws_item_sk, "
                "ws_order_number) in one commit (a merge-on-read MERGE: position deletes and the new rows, no "
                "data file rewritten; or one overwrite when they are a quarter of the rows): I/U upsert, D delete "
                "(tombstoned); per key the newest change by sequence wins if "
                "it is at least as new as the row and its tombstone, older ones are superseded. Rejected lines "
                "in `web_sales_quarantine`.",
)
def web_sales_corrections(context: dg.AssetExecutionContext, config: TpcdsLoadConfig, storage: StorageResource,
                          engine: SparkEngine) -> dg.MaterializeResult:
    with _writing(context, storage, ledger_name(TpcdsTable.WEB_SALES)) as running:
        if pending_corrections(running, Ledger(running), config.reapply):
            report = apply_corrections(running, engine.session(running), context.run.run_id, config.reapply)
        else:
            report = _nothing(running, TpcdsTable.WEB_SALES)
    return dg.MaterializeResult(metadata=load_metadata(report))


@dg.asset(
    key=QUARANTINE_KEY, group_name=GROUP, owners=OWNERS, deps=[*DIMENSION_KEYS, WEB_SALES_KEY, CORRECTIONS_KEY],
    kinds={"delta", "s3"},
    description="Every raw TPC-DS line that could not be applied, in its table's own quarantine "
                f"({', '.join(f'`{q.name}`' for q in ALL_QUARANTINES[:-1])}: source object, ETag, line, reason, "
                "detail, raw text), or in `tpcds_quarantine`, where earlier releases put every table's. Written by "
                "the loads; this asset reports their counts per table and reason.",
)
def tpcds_quarantine(storage: StorageResource) -> dg.MaterializeResult:
    with storage.running() as running:
        counts = quarantine_counts(running)
    return dg.MaterializeResult(metadata={
        "dagster/row_count": sum(n for by_reason in counts.values() for n in by_reason.values()),
        "by_reason": dg.MetadataValue.json(dict(sum((Counter(by_reason) for by_reason in counts.values()),
                                                    Counter()))),
        "by_table": dg.MetadataValue.json(counts),
    })


def quarantine_counts(storage: LakeStorage) -> dict[str, dict[str, int]]:
    """The rows of each of the star's quarantines that exist, per reason (by table name)."""
    counts = {}
    for quarantine in ALL_QUARANTINES:
        delta: DeltaTable | None = open_delta(storage, quarantine)
        if delta is not None:
            rows = delta.to_pyarrow_table(columns=["reason"]).group_by("reason").aggregate([("reason", "count")])
            counts[quarantine.name] = dict(zip(rows["reason"].to_pylist(), rows["reason_count"].to_pylist()))
    return counts


TPCDS_ASSETS = [raw_tpcds, *dimension_assets, web_sales, web_sales_corrections, tpcds_quarantine]
