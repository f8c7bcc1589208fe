"""Load raw TPC-DS objects into the Iceberg star, in the engine. Data flows one way:

raw objects -> engine reads and numbers lines -> parse.py (typed + `_reason`) -> staged
Parquet (one read of the raw data) -> quarantine (insert-if-absent) -> table commit ->
ledger (one entry per object, through the shared `Ledger`).

The Dagster process lists objects and receives per-object counts; it never holds a row.

- Facts: one object per sold day (`ws_sold_date=YYYY-MM-DD/part-00000.dat`, plus the
  `__HIVE_DEFAULT_PARTITION__` object of rows without a sold date). Loading a set of days
  reads those folders with hive-style discovery (Sail has no `input_file_name()`), and
  replaces exactly those days' rows with ONE `MERGE INTO` (`replace_days_sql`: upsert on
  the key, `WHEN NOT MATCHED BY SOURCE AND <the loaded days> THEN DELETE`) — never
  `partitionOverwriteMode`, which replaces the whole table, and not `overwrite(condition)`,
  which Sail allows only on identity-partitioned columns. A row whose `ws_sold_date_sk` is
  not its object's day is quarantined (`wrong_partition`), so a day's object can only ever
  write its own day; within the loaded objects the last line of a key wins.
- Dimensions: one snapshot object per table, upserted with one `MERGE INTO` on the
  surrogate key (the last line of a key wins; earlier ones count as superseded).

Every step is idempotent (quarantine inserts only absent rows, the MERGEs converge), and the ledger is written last, so a failed run leaves objects pending and a
rerun converges.
"""

import contextlib
import datetime as dt
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from lake_assets.core.cdc import merge_sql
from lake_assets.core.formats import iceberg
from lake_assets.core.ledger import APPLIED, REJECTED, Ledger, LedgerEntry
from lake_assets.core.quarantine import QUARANTINE_NAMES, insert_absent_frame
from lake_assets.core.raw_zone import RawObject, list_raw, pending
from lake_assets.core.tables import TPCDS_QUARANTINE, table
from lake_assets.resources.catalog import lake_catalog
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.parse import DETAIL, LINE, RAW_TEXT, REASON, SOURCE, numbered, parse
from lake_assets.tpcds.schema import (
    COLUMNS,
    JULIAN_EPOCH,
    KEYS,
    NAMESPACE,
    NULL_PARTITION,
    PARTITION_COLUMN,
    PARTITION_DAYS,
    RAW,
    TpcdsTable,
    date_sk,
    qualified,
)

STAGING = "staging/tpcds/"
DAILY, SNAPSHOT, CDC = "daily", "snapshot", "cdc"
_FOLDER = "ws_sold_date"  # the hive-style partition folder of the fact objects


@dataclass
class LoadReport:
    """What one load did to one table."""

    table: str
    snapshot_before: int | None
    rows_before: int
    snapshot_after: int | None = None
    rows_after: int = 0
    files: list[LedgerEntry] = field(default_factory=list)
    duration_seconds: float = 0.0
    #: seconds per step (parse_and_stage, quarantine, commit, count), for metadata and benchmarks
    steps: dict[str, float] = field(default_factory=dict)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.steps[name] = round(self.steps.get(name, 0.0) + time.perf_counter() - started, 3)

    def total(self, attribute: str) -> int:
        return int(sum(getattr(f, attribute) for f in self.files))


# --- the tables ------------------------------------------------------------------

def iceberg_schema(name: str):  # pyiceberg Schema
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    fields = [NestedField(i + 1, column, _iceberg_type(sql_type), required=False)
              for i, (column, sql_type) in enumerate(COLUMNS[name])]
    return Schema(*fields)


def _iceberg_type(sql_type: str):
    from pyiceberg.types import DateType, DecimalType, LongType, StringType

    if sql_type.startswith("DECIMAL("):
        precision, scale = sql_type[len("DECIMAL("):-1].split(",")
        return DecimalType(int(precision), int(scale))
    return {"BIGINT": LongType(), "STRING": StringType(), "DATE": DateType()}[sql_type]


def ensure_table(storage: LakeStorage, name: str) -> None:
    """Create `tpcds.<name>` in the catalog with the declared schema and partition spec."""
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
    from pyiceberg.transforms import TruncateTransform

    client = lake_catalog(storage).pyiceberg()
    client.create_namespace_if_not_exists(NAMESPACE)
    schema = iceberg_schema(name)
    spec = UNPARTITIONED_PARTITION_SPEC
    if name == TpcdsTable.WEB_SALES:
        source = schema.find_field(PARTITION_COLUMN).field_id
        spec = PartitionSpec(PartitionField(source_id=source, field_id=1000,
                                            transform=TruncateTransform(PARTITION_DAYS),
                                            name=f"{PARTITION_COLUMN}_trunc"))
    client.create_table_if_not_exists(
        (NAMESPACE, name), schema=schema, partition_spec=spec,
        properties={"format-version": "2", "write.parquet.compression-codec": "zstd"},
    )


# --- facts -----------------------------------------------------------------------

def fact_objects(storage: LakeStorage) -> dict[dt.date | None, RawObject]:
    """The fact object of every day in the raw zone (None: the rows without a sold date)."""
    objects: dict[dt.date | None, RawObject] = {}
    for obj in list_raw(storage, RAW.facts):
        folder = obj.key[len(RAW.facts):].split("/", 1)[0]
        if not folder.startswith(f"{_FOLDER}="):
            continue
        value = folder.split("=", 1)[1]
        day = None if value == NULL_PARTITION else dt.date.fromisoformat(value)
        if day in objects:
            raise ValueError(f"{RAW.fact_folder(day)} holds more than one object; the contract allows one")
        objects[day] = obj
    return objects


def pending_fact_days(storage: LakeStorage, ledger: Ledger, reapply: bool = False) -> list[dt.date | None]:
    """Days whose object is new (with `reapply`, also those `lake restore` reverted)."""
    objects = fact_objects(storage)
    done = ledger.settled(qualified(TpcdsTable.WEB_SALES), reapply)
    return [day for day, obj in objects.items() if (obj.key, obj.etag) not in done]


def load_fact_days(storage: LakeStorage, spark: SparkSession, days: Iterable[dt.date | None],
                   run_id: str) -> LoadReport:
    """Load the objects of `days` (those that exist), replacing exactly their partitions."""
    started = time.perf_counter()
    name = qualified(TpcdsTable.WEB_SALES)
    ensure_table(storage, TpcdsTable.WEB_SALES)
    report = start_report(storage, name)
    objects = fact_objects(storage)
    selected = {day: objects[day] for day in sorted(set(days), key=_day_order) if day in objects}
    if not selected:
        return finish_report(storage, report, started)

    folders = {(NULL_PARTITION if day is None else day.isoformat()): obj for day, obj in selected.items()}
    lines = (spark.read.text(storage.uri(RAW.facts))
             .where(F.col(_FOLDER).isin(list(folders)))
             .withColumn(SOURCE, F.col(_FOLDER)))
    day_sk = F.when(F.col(_FOLDER) == NULL_PARTITION, F.lit(None).cast("bigint")).otherwise(
        (F.datediff(F.to_date(F.col(_FOLDER)), F.lit("1970-01-01")) + JULIAN_EPOCH).cast("bigint"))
    wrong_day = ~F.col(PARTITION_COLUMN).eqNullSafe(day_sk)
    parsed = parse(numbered(lines), COLUMNS[TpcdsTable.WEB_SALES], KEYS[TpcdsTable.WEB_SALES],
                   extra=[(wrong_day, F.concat(F.lit(f"{PARTITION_COLUMN} is not the sold date of its object ("),
                                               F.col(_FOLDER), F.lit(")")))])

    with contextlib.ExitStack() as stack:
        with report.step("parse_and_stage"):
            staged = stack.enter_context(staged_parse(storage, spark, parsed.drop(_FOLDER), run_id))
        at = dt.datetime.now(dt.timezone.utc)
        with report.step("quarantine"):
            quarantine_rejected(storage, staged, folders, run_id, at)
        columns = [c for c, _ in COLUMNS[TpcdsTable.WEB_SALES]]
        latest = Window.partitionBy(*KEYS[TpcdsTable.WEB_SALES]).orderBy(F.col(SOURCE).desc(), F.col(LINE).desc())
        winners = (staged.where(F.col(REASON).isNull())
                   .withColumn("_rank", F.row_number().over(latest)).where("_rank = 1").select(SOURCE, *columns))
        view = "lake_tpcds_fact_days"
        winners.createOrReplaceTempView(view)
        with report.step("commit"):
            if report.rows_before == 0:  # an empty table: the MERGE would only insert
                winners.select(*columns).writeTo(name).append()
            else:
                spark.sql(replace_days_sql(name, view, columns, list(selected))).collect()
        with report.step("count"):
            counts = counts_per_source(staged)
            kept = {r[SOURCE]: int(r["n"]) for r in
                    winners.groupBy(SOURCE).agg(F.count(F.lit(1)).alias("n")).collect()}
        counts = {s: (lines, valid, valid - kept.get(s, 0)) for s, (lines, valid, _) in counts.items()}
    snapshot = iceberg.current_snapshot_id(iceberg.open_table(storage, table(name)))
    report.files = [ledger_entry(name, obj, DAILY, counts.get(folder, (0, 0, 0)), snapshot, run_id, at)
                    for folder, obj in folders.items()]
    Ledger(storage).record(report.files)
    return finish_report(storage, report, started)


def replace_days_sql(target: str, source: str, columns: list[str], days: Iterable[dt.date | None]) -> str:
    """ONE MERGE that makes the rows of `days` in `target` exactly `source`'s rows.

    Rows of those days absent from `source` are deleted (`WHEN NOT MATCHED BY SOURCE`),
    rows of other days are never touched, and a key that moved from another day is moved
    (updated) rather than duplicated. Sail's predicate overwrite would do it only on an
    identity-partitioned column; a MERGE works with any partition transform.
    """
    keys = KEYS[TpcdsTable.WEB_SALES]
    sks = [date_sk(day) for day in days if day is not None]
    loaded = [f"t.{PARTITION_COLUMN} IN ({', '.join(map(str, sks))})"] if sks else []
    if None in days:
        loaded.append(f"t.{PARTITION_COLUMN} IS NULL")
    return (merge_sql(target, source, keys, columns, operation=None)
            + f" WHEN NOT MATCHED BY SOURCE AND ({' OR '.join(loaded) or 'false'}) THEN DELETE")


def _day_order(day: dt.date | None) -> tuple[int, dt.date]:
    return (1, dt.date.max) if day is None else (0, day)


# --- dimensions ------------------------------------------------------------------

def pending_dimensions(storage: LakeStorage, ledger: Ledger, reapply: bool = False) -> list[str]:
    """Dimensions whose snapshot object is new (with `reapply`, also one `lake restore` reverted)."""
    names: list[str] = []
    for name in (TpcdsTable.DATE_DIM, TpcdsTable.TIME_DIM, TpcdsTable.CUSTOMER, TpcdsTable.ITEM):
        objects = list_raw(storage, RAW.dimension_key(name))
        if pending([o for o in objects if o.key == RAW.dimension_key(name)], ledger.settled(qualified(name), reapply)):
            names.append(name)
    return names


def load_dimension(storage: LakeStorage, spark: SparkSession, name: str, run_id: str) -> LoadReport:
    """Upsert the dimension's snapshot object on its surrogate key (one MERGE)."""
    started = time.perf_counter()
    qualified_name = qualified(name)
    ensure_table(storage, name)
    report = start_report(storage, qualified_name)
    key = RAW.dimension_key(name)
    objects = [o for o in list_raw(storage, key) if o.key == key]
    if not objects:
        return finish_report(storage, report, started)
    obj = objects[0]
    lines = spark.read.text(storage.uri(key)).withColumn(SOURCE, F.lit(key))
    parsed = parse(numbered(lines), COLUMNS[name], KEYS[name])
    columns = [c for c, _ in COLUMNS[name]]
    with staged_parse(storage, spark, parsed, run_id) as staged:
        at = dt.datetime.now(dt.timezone.utc)
        quarantine_rejected(storage, staged, {key: obj}, run_id, at)
        latest = Window.partitionBy(*KEYS[name]).orderBy(F.col(LINE).desc())
        winners = (staged.where(F.col(REASON).isNull())
                   .withColumn("_rank", F.row_number().over(latest)).where("_rank = 1").select(*columns))
        view = f"lake_tpcds_{name}_batch"
        winners.createOrReplaceTempView(view)
        spark.sql(merge_sql(qualified_name, view, KEYS[name], columns, operation=None)).collect()
        in_file, valid, _ = counts_per_source(staged).get(key, (0, 0, 0))
        applied = int(winners.count())
    snapshot = iceberg.current_snapshot_id(iceberg.open_table(storage, table(qualified_name)))
    report.files = [ledger_entry(qualified_name, obj, SNAPSHOT, (in_file, valid, valid - applied), snapshot, run_id, at)]
    Ledger(storage).record(report.files)
    return finish_report(storage, report, started)


# --- shared steps ----------------------------------------------------------------

@contextlib.contextmanager
def staged_parse(storage: LakeStorage, spark: SparkSession, parsed: DataFrame, run_id: str) -> Iterator[DataFrame]:
    """Write the parsed rows once as Parquet in the bucket (one read of the raw objects),
    yield them read back, and delete them afterwards."""
    prefix = f"{STAGING}{run_id}/{uuid.uuid4().hex[:8]}/"
    parsed.write.mode("overwrite").parquet(storage.uri(prefix))
    try:
        yield spark.read.parquet(storage.uri(prefix))
    finally:
        storage.delete_prefix(prefix)


def quarantine_rejected(storage: LakeStorage, staged: DataFrame, objects: dict[str, RawObject], run_id: str,
                at: dt.datetime) -> None:
    """Insert the rejected rows, with their object's key and ETag, into `tpcds_quarantine`."""
    rejected = staged.where(F.col(REASON).isNotNull())
    spark = staged.sparkSession
    sources = spark.createDataFrame([(s, o.key, o.etag) for s, o in objects.items()],
                                    f"{SOURCE} STRING, source_file STRING, source_etag STRING")
    rows = rejected.join(F.broadcast(sources), on=SOURCE).select(
        "source_file", "source_etag", F.col(LINE).alias("line_number"), F.col(REASON).alias("reason"),
        F.col(DETAIL).alias("detail"), F.col(RAW_TEXT).alias("raw_text"), F.lit(run_id).alias("run_id"),
        F.lit(at.replace(tzinfo=None).isoformat(sep=" ")).cast("timestamp").alias("quarantined_at"),
    ).select(*QUARANTINE_NAMES)
    if rows.limit(1).count():
        insert_absent_frame(storage, TPCDS_QUARANTINE, rows)


def counts_per_source(staged: DataFrame) -> dict[str, tuple[int, int, int]]:
    """(lines, valid lines, 0) per source: the only data the Dagster process receives."""
    rows = staged.groupBy(SOURCE).agg(
        F.count(F.lit(1)).alias("lines"), F.sum(F.when(F.col(REASON).isNull(), 1).otherwise(0)).alias("valid"),
    ).collect()
    return {r[SOURCE]: (int(r["lines"]), int(r["valid"] or 0), 0) for r in rows}


def ledger_entry(name: str, obj: RawObject, kind: str, counts: tuple[int, int, int], snapshot: int | None,
           run_id: str, at: dt.datetime) -> LedgerEntry:
    lines, valid, superseded = counts
    return LedgerEntry(
        table_name=name, source_file=obj.key, source_etag=obj.etag, source_size=obj.size, source_kind=kind,
        status=APPLIED if valid or not lines else REJECTED, rows_in_file=int(lines),
        rows_applied=int(valid - superseded), rows_superseded=int(superseded), rows_quarantined=int(lines - valid), table_version=snapshot, run_id=run_id,
        recorded_at=at,
    )


def start_report(storage: LakeStorage, name: str) -> LoadReport:
    current = iceberg.open_table(storage, table(name))
    return LoadReport(name, iceberg.current_snapshot_id(current) if current else None,
                      iceberg.row_count(current) if current else 0)


def finish_report(storage: LakeStorage, report: LoadReport, started: float) -> LoadReport:
    current = iceberg.open_table(storage, table(report.table))
    report.snapshot_after = iceberg.current_snapshot_id(current) if current else None
    report.rows_after = iceberg.row_count(current) if current else 0
    report.duration_seconds = time.perf_counter() - started
    return report
