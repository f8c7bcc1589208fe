"""Load raw TPC-DS objects into the Iceberg star, in the engine. Data flows one way:

raw objects -> engine reads lines -> parse.py (typed + `_reason`) -> quarantine
(insert-if-absent) -> table commit -> ledger (one entry per object, through the shared
`Ledger`).

The Dagster process lists objects and receives per-object counts; it never holds a row.

- Facts: one object per sold day (`ws_sold_date_sk=<key>/part-00000.dat`, plus the
  `__HIVE_DEFAULT_PARTITION__` object of rows without a sold date). Each object is a
  snapshot of its day as of its sequence (tpcds/sequencing.py: as of its arrival, or the
  sequence the ledger recorded for that content): its rows are upserts, the day's other
  keys older than it are deleted, and a key takes a change only if it is at least as new
  as its row and its tombstone (tpcds/apply.py, shared with the corrections). So a
  backfill never undoes a newer correction, and a key in two days ends in the newer one.
  Loading a set of days reads those folders with hive-style discovery (Sail has no
  `input_file_name()`). Into days that hold no rows (a first load, new days), when no
  tombstone is newer than the objects: one aggregate over the lines' key fields only
  (`survey` of `_line_keys`: lines per object, whether a key is listed twice or already
  in the table, and how many lines are plain: `parse.plain_line`), then ONE read appended
  straight to the table (objects whose every line is plain by the engine's CSV reader, which
  types them as the parse would at the bare engine's cost; the others parsed); the rows each
  object applied are counted in the table, so an object's rejects are its lines less those, and
  only the objects that had rejects are read again, with line numbers, for the
  quarantine. Otherwise (or when a key is listed twice or held): one aggregate over the
  parse (`survey`: lines and valid lines per object, whether any key has two valid
  lines), the rejects' re-read, then the commit straight from the raw objects (no staged
  copy): an append of new keys into empty days, else ONE commit by the change rule
  (apply.py: a merge-on-read `MERGE INTO`, or one overwrite when the changes are a quarter
  of the table's rows). Valid lines are
  numbered only when a key has two of them (the last line of an object wins); otherwise
  no window ranks the changes. A row whose `ws_sold_date_sk` is
  not its object's day is quarantined (`wrong_partition`), so a day's object can only ever
  write its own day. A folder that is not a sold date of the table's calendar, or a day
  folder holding more than one object, is refused by its layout (`fact_layout`): listed
  with a reason by `lake status`, never loaded, blocking no other day. New content for a
  day that holds rows is audited against it after the survey (core/snapshot_guard.py,
  `day_guard`): an object that would empty its day or shrink it too much is held for
  `lake approve` (its rejects quarantined, nothing committed), and the run commits the
  others. An object the engine cannot read as text fails the survey's read: it is found
  and refused whole (`bad_encoding`, tpcds/encoding.py), and the survey is done again
  without it.
- Dimensions: applied by the change core (core/apply/) on their declaration files
  (`lake_assets/tables/tpcds/<table>.yaml`): each export upserted on the surrogate key in the
  order the exports arrive, its rejects in `<table>_quarantine`.

Every step is idempotent (quarantine inserts only absent rows, the commits converge), and the
ledger is written last, so a failed run leaves objects pending and a rerun converges (an
append whose run died before its ledger entries leaves its days holding rows: the rerun
commits them again, with the same sequences, and quarantines what is absent).
"""

import contextlib
import datetime as dt
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from lake_assets.core.apply.plan import RawFile, pending as pending_files, raw_files
from lake_assets.core.apply.run import apply_pending
from lake_assets.core.column_descriptions import column_descriptions
from lake_assets.core.cdc import OPERATION
from lake_assets.core.formats import iceberg
from lake_assets.core.frames import union_all
from lake_assets.core.ledger import APPLIED, APPROVED, HELD, REJECTED, REVERTED, Ledger, LedgerEntry
from lake_assets.core.quarantine import QUARANTINE_NAMES, insert_absent_frame
from lake_assets.core.raw_zone import RawObject
from lake_assets.core.snapshot_guard import Audit, SnapshotGuard
from lake_assets.core.tables import table
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.apply import (
    UPSERT,
    Floor,
    append_rows,
    apply_changes,
    days_hold_rows,
    newer_tombstones,
    rows_per_day,
    rows_per_object,
)
from lake_assets.tpcds.encoding import is_encoding_error, read_or_refuse, refusal
from lake_assets.tpcds.layout import FOLDER
from lake_assets.tpcds.layout import FactLayout, fact_layout, fact_objects
from lake_assets.tpcds.parse import DETAIL, LINE, RAW_TEXT, REASON, SOURCE, numbered, parse, plain_line, valid_rows
from lake_assets.tpcds.raw_contract import day_folder_value
from lake_assets.tpcds.schema import (
    COLUMNS,
    DECLARATIONS,
    DIMENSIONS,
    KEYS,
    NAMESPACE,
    NULL_PARTITION,
    PARTITION_COLUMN,
    PARTITION_DAYS,
    QUARANTINES,
    RAW,
    SEQUENCE,
    TpcdsTable,
    date_sk,
    engine_name,
    ledger_name,
    sk_date,
    table_columns,
)
from lake_assets.tpcds.sequencing import SNAPSHOT_ROW, object_sequences, with_row_sequences

STAGING = "staging/tpcds/"
#: The source kinds the star's loader records in the ledger: a day object, a correction file.
DAILY, CDC = "daily", "cdc"
#: The columns of a web_sales row in the table: the raw ones, then `_sequence`.
TABLE_COLUMNS = [c for c, _ in table_columns(TpcdsTable.WEB_SALES)]
RAW_COLUMNS = [c for c, _ in COLUMNS[TpcdsTable.WEB_SALES]]
#: A fact line the engine's CSV reader types as the parse does (parse.plain_line), in its own day.
PLAIN = "_plain"
_PLAIN_LINE = plain_line(COLUMNS[TpcdsTable.WEB_SALES], KEYS[TpcdsTable.WEB_SALES])
#: A line's folder value (the day's key, or Hive's NULL folder), beside its own fields.
_DAY = "_day_folder"
#: The object's own ws_sold_date_sk field, while a read of the prefix discovers the folder's column of that name.
_IN_FILE = f"_file_{PARTITION_COLUMN}"


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
        return int(sum(getattr(f, attribute) or 0 for f in self.files))  # an object refused unread has no lines


# --- the tables ------------------------------------------------------------------

def iceberg_schema(name: str):  # pyiceberg Schema
    """The table's schema, each column's `doc` its declared description (what readers show as its comment)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    described = column_descriptions(ledger_name(name))
    fields = [NestedField(i + 1, column, _iceberg_type(sql_type), required=False, doc=described.get(column))
              for i, (column, sql_type) in enumerate(table_columns(name))]
    return Schema(*fields)


def _iceberg_type(sql_type: str):
    from pyiceberg.types import DateType, DecimalType, LongType, StringType

    if sql_type.startswith("DECIMAL("):
        precision, scale = sql_type[len("DECIMAL("):-1].split(",")
        return DecimalType(int(precision), int(scale))
    return {"BIGINT": LongType(), "STRING": StringType(), "DATE": DateType()}[sql_type]


#: The fact table's MERGE writes position deletes for the rows it replaces and appends the new rows
#: (merge-on-read), so a correction batch costs what it changes, not a rewrite of every file it
#: touches (a 1 % batch touches them all). Reads apply the deletes (Sail, DuckDB, pyiceberg);
#: maintenance's compaction folds them back into the data files.
MERGE_ON_READ = {"write.merge.mode": "merge-on-read"}


def ensure_table(storage: LakeStorage, name: str) -> None:
    """Create `tpcds.<name>` in the catalog with the declared schema, partition spec and properties
    (set on a table created before one of them)."""
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
    from pyiceberg.transforms import TruncateTransform

    client = storage.catalog().pyiceberg()
    client.create_namespace_if_not_exists(NAMESPACE)
    schema = iceberg_schema(name)
    spec = UNPARTITIONED_PARTITION_SPEC
    if name == TpcdsTable.WEB_SALES:
        source = schema.find_field(PARTITION_COLUMN).field_id
        spec = PartitionSpec(PartitionField(source_id=source, field_id=1000,
                                            transform=TruncateTransform(PARTITION_DAYS),
                                            name=f"{PARTITION_COLUMN}_trunc"))
    properties = {"format-version": "2", "write.parquet.compression-codec": "zstd",
                  **(MERGE_ON_READ if name == TpcdsTable.WEB_SALES else {})}
    created = client.create_table_if_not_exists((NAMESPACE, name), schema=schema, partition_spec=spec,
                                                properties=properties)
    unset = {k: v for k, v in properties.items() if k != "format-version" and created.properties.get(k) != v}
    if unset:  # a table created before the property
        with created.transaction() as transaction:
            transaction.set_properties(unset)
    present = {f.name for f in created.schema().fields}
    missing = [f for f in schema.fields if f.name not in present]
    if missing:  # a table written before rows carried `_sequence`: its old rows read NULL (older than any change)
        with created.update_schema() as update:
            for f in missing:
                update.add_column(f.name, f.field_type)


# --- facts -----------------------------------------------------------------------

def pending_fact_days(storage: LakeStorage, ledger: Ledger, reapply: bool = False,
                      objects: dict[dt.date | None, RawObject] | None = None) -> list[dt.date | None]:
    """Days whose object is new (with `reapply`, also those `lake restore` reverted); `objects`:
    the raw zone's fact objects when the caller has listed them already (`fact_objects`)."""
    objects = fact_objects(storage) if objects is None else objects
    done = ledger.settled(ledger_name(TpcdsTable.WEB_SALES), reapply)
    return [day for day, obj in objects.items() if (obj.key, obj.etag) not in done]


def day_guard(max_shrink: float | None = None) -> SnapshotGuard:
    """The guard of day objects (core/snapshot_guard.py) as web_sales' declaration says (`guard`;
    `max_shrink` overrides its share): a day object that is empty or would shrink its day by more
    than that share is held. Its rejected lines are quarantined and their keys leave the day like
    any key it lacks: no hold of their own (a day whose lines are mostly bad shrinks, and is held
    for that)."""
    declared = DECLARATIONS[TpcdsTable.WEB_SALES].guard
    return SnapshotGuard(declared.max_shrink if max_shrink is None else max_shrink,
                         hold_rejected=declared.hold_rejected)


@dataclass(frozen=True)
class _Survey:
    """What the survey of the day objects found (see `survey`)."""

    append: bool  # the valid rows are appended (the days hold no rows, no key is listed twice or in the table)
    empty_days: bool  # the days hold no rows
    counts: dict[str, tuple[int, int]]  # per object (folder): lines, and valid lines (appending: plain lines)
    duplicated: bool  # a key has two valid lines
    in_table: bool  # a valid line's key is in the table already


def load_fact_days(storage: LakeStorage, spark: SparkSession, days: Iterable[dt.date | None],
                   run_id: str, layout: FactLayout | None = None, guard: SnapshotGuard | None = None) -> LoadReport:
    """Load the objects of `days` (those that exist), each a snapshot of its day (see above);
    `layout`: the raw zone's fact layout when the caller has listed it already; `guard`: the
    day objects' (`day_guard()` unless given). An object the engine cannot read as text is
    refused whole (tpcds/encoding.py); a new one that would empty or shrink a day holding
    rows is held for `lake approve` (core/snapshot_guard.py); neither blocks another."""
    started = time.perf_counter()
    guard = guard or day_guard()
    name = ledger_name(TpcdsTable.WEB_SALES)
    ensure_table(storage, TpcdsTable.WEB_SALES)
    report = start_report(storage, name)
    layout = fact_layout(storage) if layout is None else layout
    selected = {day: layout.objects[day] for day in sorted(set(days), key=_day_order) if day in layout.objects}
    if not selected:
        return finish_report(storage, report, started)

    folders = {day_folder_value(day): obj for day, obj in selected.items()}
    ledger = Ledger(storage)
    history = ledger.entries(name).to_pylist()
    sequences = object_sequences(history, list(folders.values()))
    row_sequences = {folder: sequences[obj.key].prefix + SNAPSHOT_ROW for folder, obj in folders.items()}
    floors = {folder: Floor(None if day is None else date_sk(day), sequences[obj.key].base)
              for (day, obj), folder in zip(selected.items(), folders)}
    odd = bool(layout.refused)

    def parsed_facts(objects: dict[str, RawObject], number: bool = False) -> DataFrame:
        lines = _fact_lines(storage, spark, objects, odd)
        return _parse_facts(numbered(lines) if number else lines)

    def survey_days(objects: dict[str, RawObject]) -> _Survey:
        # appending is right when the days hold no rows and no key is in the table yet (a key
        # may move between days): that is checked in the survey, against the table's keys
        chosen = {folder: floors[folder] for folder in objects}
        empty_days = report.rows_before == 0 or not days_hold_rows(spark, chosen)
        against = spark.table(engine_name(TpcdsTable.WEB_SALES)) if empty_days and report.rows_before else None
        if empty_days and newer_tombstones(storage, spark, chosen) is None:
            # the lines' keys only (no parse): if no key is listed twice or held, neither is a valid one's
            line_counts, duplicated, in_table = survey(_line_keys(_fact_lines(storage, spark, objects, odd)),
                                                       against, counted=PLAIN)
            if not (duplicated or in_table):
                return _Survey(True, True, line_counts, False, False)
        counts, duplicated, in_table = survey(parsed_facts(objects), against)
        return _Survey(False, empty_days, counts, duplicated, in_table)

    with report.step("survey"):
        found, unreadable = read_or_refuse(folders, survey_days, lambda objects: _readable(storage, spark, objects))
    for folder in unreadable:
        del folders[folder], floors[folder], row_sequences[folder]
    latest = {(e["source_file"], e["source_etag"]): e for e in history}
    # a day object into days that hold rows is audited, unless its content was published before
    waiting = {} if found.empty_days else _audit(spark, guard, folders, floors, found.counts, latest)
    publish = {folder: obj for folder, obj in folders.items() if folder not in waiting}
    at = dt.datetime.now(dt.timezone.utc)
    counts = found.counts
    applied: dict[str, int] = {}
    if found.append:  # ONE read (CSV reader or parse): valid rows appended, counted in the table; lines - applied: rejects
        with report.step("commit"):
            append_rows(with_row_sequences(_valid_facts(storage, spark, folders, counts, odd, parsed_facts),
                                           row_sequences, SOURCE, SEQUENCE))
            held_rows = rows_per_object(spark, floors)
            applied = {folder: held_rows.get(sequences[obj.key].prefix, 0) for folder, obj in folders.items()}
            counts = {folder: (counts.get(folder, (0, 0))[0], applied[folder]) for folder in folders}
        with report.step("quarantine"):
            quarantine_rejects(storage, counts, folders, parsed_facts, run_id, at)
    else:
        with report.step("quarantine"):  # a held object's rejects too: they are audited, as insurance's are
            quarantine_rejects(storage, counts, folders, parsed_facts, run_id, at)
        if publish:
            with report.step("commit"):
                applied = _merge(storage, spark, parsed_facts(publish, number=found.duplicated), counts,
                                 found.duplicated, publish, {f: row_sequences[f] for f in publish},
                                 {f: floors[f] for f in publish}, found.empty_days and not found.in_table, run_id, at)
    snapshot = iceberg.current_snapshot_id(iceberg.open_table(storage, table(name)))
    report.files = [ledger_entry(name, obj, DAILY, _accounted(counts.get(folder, (0, 0)), applied.get(folder, 0)),
                                 snapshot, run_id, at, sequences[obj.key].base) for folder, obj in publish.items()]
    report.files += [held_entry(name, obj, DAILY, counts.get(folder, (0, 0)), run_id, at, sequences[obj.key].base,
                                waiting[folder]) for folder, obj in folders.items() if folder in waiting]
    report.files += [refused_entry(name, obj, DAILY, run_id, at, sequences[obj.key].base,
                                   refusal(storage, obj)) for obj in unreadable.values()]
    ledger.record(report.files)
    return finish_report(storage, report, started)


#: Ledger statuses of content published once: a day object loaded again with it (a backfill, a
#: reapply after `lake restore`, an approval) is not audited again.
_PUBLISHED = (APPLIED, APPROVED, REVERTED)


def _audit(spark: SparkSession, guard: SnapshotGuard, folders: dict[str, RawObject], floors: dict[str, Floor],
           counts: dict[str, tuple[int, int]], latest: dict[tuple[str, str], dict]) -> dict[str, str]:
    """Why each day object that must wait for `lake approve` is held, by folder: new content
    (or content held before) audited against its day, if the day holds rows. A day keeps the
    rows newer than the object (later corrections), so they count on its side."""
    audited = {folder: floors[folder] for folder, obj in folders.items()
               if latest.get((obj.key, obj.etag), {}).get("status") not in _PUBLISHED}
    waiting = {}
    for folder, (before, newer) in (rows_per_day(spark, audited) if audited else {}).items():
        lines, valid = counts.get(folder, (0, 0))
        scope = "the rows without a sold date" if folder == NULL_PARTITION else f"the day {sk_date(int(folder))}"
        why = guard.hold(Audit(scope, valid, lines - valid, before, valid + newer))
        if why is not None:
            waiting[folder] = why
    return waiting


def _readable(storage: LakeStorage, spark: SparkSession, objects: dict[str, RawObject]) -> bool:
    """Whether the engine reads every line of `objects` (each by its own path) as text."""
    paths = [storage.uri(obj.key) for obj in objects.values() if obj.size]
    try:
        if paths:
            spark.read.text(paths).count()
    except Exception as error:  # the engine's own error class (Spark Connect's, or the JVM's)
        if is_encoding_error(error):
            return False
        raise
    return True


def quarantine_rejects(storage: LakeStorage, counts: dict[str, tuple[int, int]], folders: dict[str, RawObject],
                       parsed_facts: Callable[..., DataFrame], run_id: str, at: dt.datetime) -> None:
    """Quarantine the rejects of the objects whose (lines, valid lines) differ: only those
    objects are read again, with line numbers."""
    rejects = {folder: obj for folder, obj in folders.items() if counts.get(folder, (0, 0))[1] < counts.get(folder, (0, 0))[0]}
    if rejects:
        quarantine_rejected(storage, parsed_facts(rejects, number=True), rejects, run_id, at)


def _merge(storage: LakeStorage, spark: SparkSession, parsed: DataFrame, counts: dict[str, tuple[int, int]],
           duplicated: bool, folders: dict[str, RawObject], row_sequences: dict[str, str], floors: dict[str, Floor],
           into_empty: bool, run_id: str, at: dt.datetime) -> dict[str, int]:
    """The day objects' valid rows applied by the change rule (apply.py); the changes applied per object."""
    changes = (with_row_sequences(valid_rows(parsed), row_sequences, SOURCE, SEQUENCE)
               .select(SOURCE, F.lit(UPSERT).alias(OPERATION), *TABLE_COLUMNS, *([LINE] if duplicated else [])))
    return apply_changes(storage, spark, changes, folders, floors, into_empty,
                         lambda frame: staged_parse(storage, spark, frame, run_id), at,
                         counts=None if duplicated else {s: valid for s, (_, valid) in counts.items()},
                         tie=LINE if duplicated else None)


def _line_keys(lines: DataFrame) -> DataFrame:
    """SOURCE and the key columns of every line (as `survey` takes them, without parsing the rest),
    REASON NULL where every key field casts: their keys are a superset of the valid lines' keys
    (a line of too few fields may yield a wrong key: at worst a key listed twice that is not,
    which only sends the load to the MERGE); and PLAIN, whether the line is plain (see above)."""
    def field(i: int) -> Column:  # the i-th field of a line that has one (cheaper than splitting it whole)
        return F.substring_index(F.substring_index(F.col("value"), "|", i + 1), "|", -1)

    keys = [F.expr(f"try_cast(nullif(_k{i}, '') AS BIGINT)").alias(k)
            for i, k in enumerate(KEYS[TpcdsTable.WEB_SALES])]
    fields = lines.select(SOURCE, "value", _DAY, *(field(RAW_COLUMNS.index(k)).alias(f"_k{i}")
                                                      for i, k in enumerate(KEYS[TpcdsTable.WEB_SALES])))
    day = F.coalesce(_folder_day_sk().cast("string"), F.lit(""))
    plain = F.col("value").rlike(_PLAIN_LINE) & (field(RAW_COLUMNS.index(PARTITION_COLUMN)) == day) \
        if _PLAIN_LINE else F.lit(False)
    typed = fields.select(SOURCE, *keys, plain.alias(PLAIN))
    unkeyed = F.lit(False)
    for k in KEYS[TpcdsTable.WEB_SALES]:
        unkeyed = unkeyed | F.col(k).isNull()
    return typed.withColumn(REASON, F.when(unkeyed, F.lit("unkeyed")))


def _folder_day_sk() -> Column:
    """The date key a line's folder names: NULL for the rows without a sold date."""
    return F.when(F.col(_DAY) == NULL_PARTITION, F.lit(None).cast("bigint")).otherwise(F.col(_DAY).cast("bigint"))


def _parse_facts(lines: DataFrame) -> DataFrame:
    """The parse of fact lines (`value`, the folder's value as _DAY, SOURCE; LINE if numbered):
    a row whose sold date is not its object's day is `wrong_partition`."""
    wrong_day = ~F.col(PARTITION_COLUMN).eqNullSafe(_folder_day_sk())
    return parse(lines, COLUMNS[TpcdsTable.WEB_SALES], KEYS[TpcdsTable.WEB_SALES],
                 extra=[(wrong_day, F.concat(F.lit(f"{PARTITION_COLUMN} is not the sold date its object's folder "
                                                   f"names ({FOLDER}="), F.col(_DAY), F.lit(")")))]).drop(_DAY)


def survey(parsed: DataFrame, table_keys: DataFrame | None = None,
           counted: str | None = None) -> tuple[dict[str, tuple[int, int]], bool, bool]:
    """(lines, valid lines) per SOURCE; whether any web_sales key has more than one valid line
    in `parsed` (one object or several); and whether a valid line's key is in `table_keys` (a
    frame with the key columns, e.g. the table; None: not asked). ONE aggregate over the
    parse (grouping sets), nothing staged; the Dagster process receives one row per object.
    `counted`: a boolean column of `parsed` counted per SOURCE in place of its valid lines."""
    spark, keys = parsed.sparkSession, KEYS[TpcdsTable.WEB_SALES]
    parsed.createOrReplaceTempView("lake_tpcds_survey")
    source = "lake_tpcds_survey"
    if table_keys is not None:
        table_keys.createOrReplaceTempView("lake_tpcds_survey_keys")
        on = " AND ".join(f"p.{k} = e.{k}" for k in keys)
        source = (f"(SELECT p.*, e.{keys[0]} IS NOT NULL AS _held FROM lake_tpcds_survey p LEFT JOIN (SELECT DISTINCT "
                  f"{', '.join(keys)} FROM lake_tpcds_survey_keys) e ON {on})")
    held = "_held" if table_keys is not None else "FALSE"
    rows = spark.sql(
        f"SELECT CASE WHEN by_key = 0 THEN {SOURCE} END AS source, sum(CASE WHEN by_key = 0 THEN lines END) AS lines, "
        f"sum(CASE WHEN by_key = 0 THEN valid END) AS valid, sum(CASE WHEN by_key = 0 THEN held END) AS held, "
        f"count_if(by_key = 1 AND valid_keys > 1) AS duplicated "
        f"FROM (SELECT {SOURCE}, grouping({SOURCE}) AS by_key, count(*) AS lines, "
        f"count_if({REASON} IS NULL) AS valid_keys, count_if({counted or f'{REASON} IS NULL'}) AS valid, "
        f"count_if({REASON} IS NULL AND {held}) AS held FROM {source} "
        f"GROUP BY GROUPING SETS (({SOURCE}), ({', '.join(keys)}))) GROUP BY 1").collect()
    counts = {r["source"]: (int(r["lines"]), int(r["valid"] or 0)) for r in rows if r["source"] is not None}
    return counts, any(r["duplicated"] for r in rows), any(r["held"] for r in rows)


def _accounted(counts: tuple[int, int], applied: int) -> tuple[int, int, int]:
    lines, valid = counts
    return lines, valid, valid - applied


def _valid_facts(storage: LakeStorage, spark: SparkSession, folders: dict[str, RawObject],
                 counts: dict[str, tuple[int, int]], odd: bool, parsed_facts: Callable[..., DataFrame]) -> DataFrame:
    """SOURCE and the raw columns of the valid lines of the objects of `folders`, given their
    (lines, plain lines): an object whose every line is plain is read by the engine's CSV
    reader (the bare engine's cost: no split, cast or reason per field), the others parsed."""
    plain = {folder: obj for folder, obj in folders.items() if _all_plain(counts.get(folder, (0, 0)))}
    frames = [_fact_csv(storage, spark, plain, odd)] if plain else []
    if len(plain) < len(folders):
        rest = {folder: obj for folder, obj in folders.items() if folder not in plain}
        frames.append(valid_rows(parsed_facts(rest)).select(SOURCE, *RAW_COLUMNS))
    return union_all(frames)


def _all_plain(counts: tuple[int, int]) -> bool:
    lines, plain_lines = counts
    return lines == plain_lines


def _fact_lines(storage: LakeStorage, spark: SparkSession, folders: dict[str, RawObject], odd: bool) -> DataFrame:
    """The lines (`value`) of the objects of `folders` (by folder value), with the folder value as
    _DAY and SOURCE (see `_read_facts`)."""
    return _read_facts(spark, storage, folders, odd, "value STRING", lambda uri, _: spark.read.text(uri))


def _fact_csv(storage: LakeStorage, spark: SparkSession, folders: dict[str, RawObject], odd: bool) -> DataFrame:
    """SOURCE and the raw columns of the objects of `folders`, typed by the engine's CSV reader:
    only for objects of plain lines (parse.plain_line), which it types as the parse does."""
    # the object's own ws_sold_date_sk field read under another name: the folder's column is the partition's
    schema = ", ".join(f"{_IN_FILE if c == PARTITION_COLUMN else c} {t}" for c, t in COLUMNS[TpcdsTable.WEB_SALES])
    rows = _read_facts(spark, storage, folders, odd, schema, lambda uri, hive: spark.read.csv(
        uri, schema=f"{schema}, {FOLDER} STRING" if hive else schema, sep="|", header=False))
    return rows.withColumnRenamed(_IN_FILE, PARTITION_COLUMN).select(SOURCE, *RAW_COLUMNS)


def _read_facts(spark: SparkSession, storage: LakeStorage, folders: dict[str, RawObject], odd: bool, schema: str,
                read: Callable[[str, bool], DataFrame]) -> DataFrame:
    """`read(uri, hive)` (`schema`: what it reads; `hive`: the prefix, whose folder column the
    reader discovers) of the objects of `folders` (by folder value), with the folder value as
    _DAY and SOURCE: ONE read of the prefix with hive-style discovery, or, when the
    prefix holds objects the layout refuses (Sail's discovery fails on mixed depths, and it
    has no `basePath`), one read per object with its folder as a literal. Empty objects have
    no lines (and, when every object is empty, Sail's discovery finds no folder column)."""
    folders = {folder: obj for folder, obj in folders.items() if obj.size}
    if not folders:
        return spark.createDataFrame([], f"{schema}, {_DAY} STRING, {SOURCE} STRING")
    if not odd:
        # Sail reads the folder values as text; JVM Spark types them (integers), and Hive's default
        # partition as NULL: the filter is on the column as read (partitions pruned), then both
        # engines' values become the folder's text
        wanted = F.col(FOLDER).isin(list(folders))
        if NULL_PARTITION in folders:
            wanted = wanted | F.col(FOLDER).isNull()
        folder = F.coalesce(F.col(FOLDER).cast("string"), F.lit(NULL_PARTITION))
        return (read(storage.uri(RAW.facts), True).where(wanted)
                .withColumn(_DAY, folder).drop(FOLDER).withColumn(SOURCE, F.col(_DAY)))
    reads = [read(storage.uri(obj.key), False).withColumn(_DAY, F.lit(folder)).withColumn(SOURCE, F.lit(folder))
             for folder, obj in folders.items()]
    return union_all(reads)


def _day_order(day: dt.date | None) -> tuple[int, dt.date]:
    return (1, dt.date.max) if day is None else (0, day)


# --- dimensions ------------------------------------------------------------------

def pending_exports(storage: LakeStorage, latest: dict[str, dict[tuple[str, str], dict]],
                    reapply: bool = False) -> dict[str, list[RawFile]]:
    """Each dimension's exports the change core would apply (any object under its prefix; with
    `reapply`, also those `lake restore` reverted), given the ledger's latest entries by table."""
    return {name: pending_files(DECLARATIONS[name], raw_files(DECLARATIONS[name], storage),
                                latest.get(DECLARATIONS[name].table_name, {}), reapply) for name in DIMENSIONS}


def pending_dimensions(storage: LakeStorage, ledger: Ledger, reapply: bool = False) -> list[str]:
    """Dimensions with an export the change core would apply, from one read of the ledger."""
    return [name for name, exports in pending_exports(storage, ledger.latest_by_table(), reapply).items() if exports]


def load_dimension(storage: LakeStorage, spark: SparkSession, name: str, run_id: str,
                   reapply: bool = False) -> LoadReport:
    """Apply the dimension's pending exports with the change core, as its declaration says
    (`lake_assets/tables/tpcds/<name>.yaml`): each export upserted on the surrogate key in the order
    the exports arrive (a key an export no longer holds is kept), its bad lines quarantined in
    `<name>_quarantine` with their reasons, the ledger written last."""
    applied = apply_pending(DECLARATIONS[name], storage, spark, run_id, reapply=reapply)
    return LoadReport(ledger_name(name), applied.version_before, applied.rows_before, applied.version_after,
                      applied.rows_after, applied.files, applied.duration_seconds)


# --- shared steps ----------------------------------------------------------------

@contextlib.contextmanager
def staged_parse(storage: LakeStorage, spark: SparkSession, parsed: DataFrame, run_id: str) -> Iterator[DataFrame]:
    """Write the parsed rows (or any frame) once as Parquet in the bucket (one read of the raw
    objects), yield them read back, and delete them afterwards."""
    prefix = f"{STAGING}{run_id}/{uuid.uuid4().hex[:8]}/"
    parsed.write.mode("overwrite").parquet(storage.uri(prefix))
    try:
        if any(o["Key"].endswith(".parquet") for o in storage.list_objects(prefix)):
            yield spark.read.parquet(storage.uri(prefix))
        else:  # no rows: the engine wrote no file to read the schema from
            yield spark.createDataFrame([], parsed.schema)
    finally:
        storage.delete_prefix(prefix)


def quarantine_rejected(storage: LakeStorage, staged: DataFrame, objects: dict[str, RawObject], run_id: str,
                at: dt.datetime) -> None:
    """Insert the rejected rows, with their object's key and ETag, into `web_sales_quarantine` (the
    change core's quarantine of the table, as every declared table has)."""
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
        insert_absent_frame(storage, QUARANTINES[TpcdsTable.WEB_SALES], rows)


def counts_per_source(staged: DataFrame) -> dict[str, tuple[int, int, int]]:
    """(lines, valid lines, 0) per source: the only data the Dagster process receives."""
    rows = staged.groupBy(SOURCE).agg(
        F.count(F.lit(1)).alias("lines"), F.sum(F.when(F.col(REASON).isNull(), 1).otherwise(0)).alias("valid"),
    ).collect()
    return {r[SOURCE]: (int(r["lines"]), int(r["valid"] or 0), 0) for r in rows}


def ledger_entry(name: str, obj: RawObject, kind: str, counts: tuple[int, int, int], snapshot: int | None,
                 run_id: str, at: dt.datetime, sequence: str | None = None, detail: str | None = None) -> LedgerEntry:
    lines, valid, superseded = counts
    return LedgerEntry(
        table_name=name, source_file=obj.key, source_etag=obj.etag, source_size=obj.size, source_kind=kind,
        status=APPLIED if valid or not lines else REJECTED, rows_in_file=int(lines),
        rows_applied=int(valid - superseded), rows_superseded=int(superseded), rows_quarantined=int(lines - valid), table_version=snapshot, run_id=run_id,
        recorded_at=at, detail=detail, source_sequence=sequence,
    )


def held_entry(name: str, obj: RawObject, kind: str, counts: tuple[int, int], run_id: str, at: dt.datetime,
               sequence: str, why: str) -> LedgerEntry:
    """The entry of an object held for `lake approve` (`why`): its lines and rejects counted, nothing
    applied, and the sequence it keeps when it is published."""
    lines, valid = counts
    return LedgerEntry(
        table_name=name, source_file=obj.key, source_etag=obj.etag, source_size=obj.size, source_kind=kind,
        status=HELD, rows_in_file=int(lines), rows_applied=0, rows_superseded=0, rows_quarantined=int(lines - valid),
        table_version=None, run_id=run_id, recorded_at=at, detail=why, source_sequence=sequence,
    )


def refused_entry(name: str, obj: RawObject, kind: str, run_id: str, at: dt.datetime, sequence: str,
                  why: str) -> LedgerEntry:
    """The entry of an object refused whole without being read (`why`): its lines are not counted."""
    return LedgerEntry(
        table_name=name, source_file=obj.key, source_etag=obj.etag, source_size=obj.size, source_kind=kind,
        status=REJECTED, rows_in_file=None, rows_applied=0, rows_superseded=0, rows_quarantined=0,
        table_version=None, run_id=run_id, recorded_at=at, detail=why, source_sequence=sequence,
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
