"""A declared table's asset checks, made from its declaration; blocking, run after each apply.

Each check verifies the table independently of the code that wrote it: delta-rs reads the log
(a second reader; pyiceberg the catalog's metadata for an Iceberg table), the engine counts and
compares rows (the orchestrator holds none), and the raw objects are recounted on the engine by
Python's csv module, not by the lake's parser.
"""

import csv
import io
import json
import os
from collections.abc import Iterable, Iterator

import dagster as dg
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lake_assets.core.apply import feed
from lake_assets.core.apply.history import IS_CURRENT
from lake_assets.core.apply.layout import file_layout
from lake_assets.core.apply.resolve import AUDIT_TYPES, table_columns
from lake_assets.core.apply.curated_iceberg import iceberg_type
from lake_assets.core.formats import iceberg
from lake_assets.core.tables import LakeTable, TableFormat, table_set
from lake_assets.core.change_feed import covered_through, read_commit
from lake_assets.core.declaration import Action, Expectation, TableDeclaration
from lake_assets.core.dms import DmsLayout
from lake_assets.core.formats.delta import open_table
from lake_assets.core.partition_fields import iceberg_partitioning
from lake_assets.core.ledger import HELD, Ledger
from lake_assets.declared.keys import asset_key, table_key
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource

_DELTA_TYPES = {"INT": "integer", "BIGINT": "long", "DATE": "date", "STRING": "string", "TIMESTAMP": "timestamp",
                "BOOLEAN": "boolean", "DOUBLE": "double"}
_AUDIT_TYPES = {"_operation": "string", "_source_file": "string", "_source_line": "long",
                "_applied_at": "timestamp", "_sequence": "string"}


def table_checks(declaration: TableDeclaration) -> list[dg.AssetChecksDefinition]:
    """Every check of the declared table (and of the feed and history it keeps)."""
    name = declaration.name
    tables = table_set(declaration)
    asset = table_key(declaration)

    @dg.asset_check(asset=asset, name="schema_matches_contract", blocking=True,
                    description="The table's schema equals the declared contract's columns and the audit columns.")
    def schema(storage: StorageResource) -> dg.AssetCheckResult:
        with storage.running() as running:
            return schema_matches_contract(declaration, running)

    @dg.asset_check(asset=asset, name="key_unique_not_null", blocking=True,
                    description=f"The key ({', '.join(declaration.keys)}) is unique and never null.")
    def key(storage: StorageResource, engine: SparkEngine) -> dg.AssetCheckResult:
        with storage.running() as running:
            return key_unique_not_null(declaration, running, engine.session(running))

    @dg.asset_check(asset=asset, name="row_count_reconciles", blocking=True,
                    description="For every commit of the run: rows before + inserted - deleted = rows after, "
                                "counted from the table's metadata (delta-rs or pyiceberg).")
    def reconciles(context: dg.AssetCheckExecutionContext, storage: StorageResource) -> dg.AssetCheckResult:
        with storage.running() as running:
            return row_count_reconciles(declaration, _latest_metadata(context, asset), running)

    @dg.asset_check(asset=asset, name="rows_conserved", blocking=True,
                    description="Every raw row of the run's objects is applied, superseded, quarantined or held "
                                "(recounted on the engine by Python's csv module); the quarantine holds exactly the "
                                "quarantined ones.")
    def conserved(context: dg.AssetCheckExecutionContext, storage: StorageResource,
                  engine: SparkEngine) -> dg.AssetCheckResult:
        with storage.running() as running:
            return rows_conserved(declaration, context.run.run_id, running, engine.session(running))

    checks = [schema, key, reconciles, conserved, *(_expectation_check(declaration, e) for e in declaration.expectations)]
    if tables.table.feed:
        @dg.asset_check(asset=asset_key(tables.changes), name="covers_table", blocking=True,
                        description=f"The feed covers every version of `{name}`: no version newer than the feed's "
                                    "newest has changes left to derive.")
        def covers(storage: StorageResource, engine: SparkEngine) -> dg.AssetCheckResult:
            with storage.running() as running:
                return feed_covers_table(declaration, running, engine.session(running))
        checks.append(covers)
    if declaration.history:
        @dg.asset_check(asset=asset_key(tables.history), name="matches_table", blocking=True,
                        description="SCD2: one current row per live key, and the current rows equal the table's "
                                    "(data columns), compared on the engine.")
        def matches(storage: StorageResource, engine: SparkEngine) -> dg.AssetCheckResult:
            with storage.running() as running:
                return history_matches_table(declaration, running, engine.session(running))
        checks.append(matches)
    return checks


def _expectation_check(declaration: TableDeclaration, expectation: Expectation) -> dg.AssetChecksDefinition:
    """The outcome of one expectation in the table's last run: its failing rows (kept for `warn`,
    quarantined for `drop`; a `fail` one failed the run before this check)."""
    blocking = expectation.action is Action.FAIL
    kept = {Action.WARN: "kept", Action.DROP: "quarantined (reason expectation)", Action.FAIL: "the run failed"}
    asset = table_key(declaration)

    @dg.asset_check(asset=asset, name=f"expect_{expectation.name}", blocking=blocking,
                    description=f"{expectation.condition} ({expectation.action.value}: failing rows are "
                                f"{kept[expectation.action]})")
    def check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        failed = _latest_metadata(context, asset).get(f"expectation_{expectation.name}_failed_rows", 0)
        return dg.AssetCheckResult(
            passed=not failed, severity=dg.AssetCheckSeverity.ERROR if blocking else dg.AssetCheckSeverity.WARN,
            metadata={"failed_rows": failed, "condition": expectation.condition, "action": expectation.action.value})
    return check


def _latest_metadata(context: dg.AssetCheckExecutionContext, key: dg.AssetKey) -> dict:
    event = context.instance.get_latest_materialization_event(key)
    if event is None or event.asset_materialization is None:
        return {}
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


def schema_matches_contract(declaration: TableDeclaration, storage: LakeStorage) -> dg.AssetCheckResult:
    if declaration.format is TableFormat.ICEBERG:
        return _iceberg_schema_matches(declaration, storage)
    delta = open_table(storage, table_set(declaration).table)
    if delta is None:
        return dg.AssetCheckResult(passed=True, metadata={"note": "table not created yet"})
    actual = [(f["name"], f["type"]) for f in json.loads(delta.schema().to_json())["fields"]]
    types = {c.name: _delta_type(c.type) for c in declaration.columns} | _AUDIT_TYPES
    expected = [(name, types[name]) for name in table_columns(declaration)]
    partitioned = list(declaration.partition_by)
    actual_partitioning = delta.metadata().partition_columns
    return dg.AssetCheckResult(passed=actual_partitioning == partitioned and _in_order(actual, partitioned) ==
                               _in_order(expected, partitioned), metadata={
        "expected": dg.MetadataValue.json(expected), "actual": dg.MetadataValue.json(actual),
        "expected_partition_columns": dg.MetadataValue.json(partitioned),
        "actual_partition_columns": dg.MetadataValue.json(actual_partitioning)})


def _iceberg_schema_matches(declaration: TableDeclaration, storage: LakeStorage) -> dg.AssetCheckResult:
    """The Iceberg schema (pyiceberg) against the declared columns, and its partition spec."""
    found = iceberg.open_table(storage, table_set(declaration).table)
    if found is None:
        return dg.AssetCheckResult(passed=True, metadata={"note": "table not created yet"})
    schema = found.schema()
    actual = [(f.name, str(f.field_type)) for f in schema.fields]
    types = {c.name: c.type for c in declaration.columns} | {k: v.upper() for k, v in AUDIT_TYPES.items()}
    expected = [(name, str(iceberg_type(types[name]))) for name in table_columns(declaration)]
    partitioned = list(declaration.partition_by)
    actual_partitioning = iceberg_partitioning(found)
    return dg.AssetCheckResult(passed=actual == expected and actual_partitioning == partitioned, metadata={
        "expected": dg.MetadataValue.json(expected), "actual": dg.MetadataValue.json(actual),
        "expected_partition_columns": dg.MetadataValue.json(partitioned),
        "actual_partition_columns": dg.MetadataValue.json(actual_partitioning)})


def _exists(storage: LakeStorage, table: LakeTable) -> bool:
    if table.format is TableFormat.ICEBERG:
        found = iceberg.open_table(storage, table)
        return found is not None and found.current_snapshot() is not None
    return open_table(storage, table) is not None


def _read(spark: SparkSession, storage: LakeStorage, table: LakeTable) -> DataFrame:
    """The table's current rows, read by the engine (by catalog name or by path)."""
    if table.format is TableFormat.ICEBERG:
        return spark.read.table(table.engine_name)
    return spark.read.format("delta").load(table.uri(storage))


def _in_order(fields: list[tuple[str, str]], partition_columns: list[str]) -> list[tuple[str, str]]:
    """The fields in the order a table's schema must keep: its data columns as declared, then its
    partition columns (which an engine may move: Sail puts them last)."""
    return [f for f in fields if f[0] not in partition_columns] + \
        sorted(f for f in fields if f[0] in partition_columns)


def _delta_type(sql_type: str) -> str:
    return _DELTA_TYPES.get(sql_type) or sql_type.lower().replace(" ", "")


def key_unique_not_null(declaration: TableDeclaration, storage: LakeStorage, spark: SparkSession) -> dg.AssetCheckResult:
    table = table_set(declaration).table
    if not _exists(storage, table):
        return dg.AssetCheckResult(passed=True, metadata={"note": "table not created yet"})
    keys = list(declaration.keys)
    rows = _read(spark, storage, table)
    keyed = F.when(F.greatest(*[F.col(k).isNull().cast("int") for k in keys]) == 0, F.lit(1)) if len(keys) > 1 \
        else F.when(F.col(keys[0]).isNotNull(), F.lit(1))
    row = rows.agg(F.count(F.lit(1)).alias("n"), F.count(keyed).alias("keyed"),
                   F.countDistinct(*keys).alias("distinct_keys")).collect()[0]
    return dg.AssetCheckResult(passed=row["n"] == row["keyed"] == row["distinct_keys"], metadata={
        "rows": row["n"], "null_keys": row["n"] - row["keyed"], "duplicate_keys": row["keyed"] - row["distinct_keys"]})


def row_count_reconciles(declaration: TableDeclaration, metadata: dict, storage: LakeStorage) -> dg.AssetCheckResult:
    table = table_set(declaration).table
    commits = metadata.get("commits") or []
    problems, previous = [], metadata.get("rows_before", 0)

    def count(version: int) -> int:
        delta = open_table(storage, table, version=version)
        return delta.to_pyarrow_dataset().count_rows() if delta else 0  # Parquet footers: no row is read

    found = iceberg.open_table(storage, table) if table.format is TableFormat.ICEBERG else None

    def snapshot_rows(snapshot_id: int | None) -> int:  # from the snapshot's summary
        snapshot = found.snapshot_by_id(snapshot_id) if found is not None and snapshot_id is not None else None
        return iceberg.live_rows(snapshot) if snapshot is not None else 0

    for commit in commits:
        version = commit["version"]
        if found is not None:
            snapshot = found.snapshot_by_id(version)
            before = snapshot_rows(snapshot.parent_snapshot_id) if snapshot is not None else 0
            after = snapshot_rows(version)
        else:
            before = count(version - 1) if version > 0 else 0
            after = count(version)
        if before + commit["inserted"] - commit["deleted"] != after:
            problems.append(f"v{version}: {before} + {commit['inserted']} - {commit['deleted']} != {after}")
        previous = after
    return dg.AssetCheckResult(passed=not problems and previous == metadata.get("rows_after", previous), metadata={
        "commits_checked": len(commits), "problems": dg.MetadataValue.json(problems)})


def rows_conserved(declaration: TableDeclaration, run_id: str, storage: LakeStorage,
                   spark: SparkSession) -> dg.AssetCheckResult:
    """Every raw row of the run's objects is accounted for, and the quarantine holds the quarantined ones."""
    tables = table_set(declaration)
    entries = [e for e in Ledger(storage).entries(declaration.table_name).to_pylist() if e["run_id"] == run_id]
    if not entries:
        return dg.AssetCheckResult(passed=True, metadata={"files_checked": 0})
    quarantined: dict[tuple[str, str], int] = {}
    if open_table(storage, tables.quarantine) is not None:
        files = spark.createDataFrame([(e["source_file"], e["source_etag"]) for e in entries],
                                      "source_file STRING, source_etag STRING")
        counted = spark.read.format("delta").load(tables.quarantine.uri(storage)) \
            .join(F.broadcast(files), ["source_file", "source_etag"], "left_semi") \
            .groupBy("source_file", "source_etag").count().collect()
        quarantined = {(r["source_file"], r["source_etag"]): int(r["count"]) for r in counted}
    recounts = independent_counts(declaration, storage, spark, entries)
    problems = []
    for entry in entries:
        accounted = entry["rows_applied"] + entry["rows_superseded"] + entry["rows_quarantined"]
        if entry["status"] == HELD and accounted == entry["rows_quarantined"]:
            accounted = entry["rows_in_file"]  # its valid rows wait for `lake approve`
        in_quarantine = quarantined.get((entry["source_file"], entry["source_etag"]), 0)
        recount = recounts.get((entry["source_file"], entry["source_etag"]))
        if accounted != entry["rows_in_file"] or in_quarantine != entry["rows_quarantined"] \
                or (recount is not None and recount != entry["rows_in_file"]):
            problems.append({"file": entry["source_file"], "rows_in_file": entry["rows_in_file"],
                             "independent_count": recount, "accounted": accounted, "in_quarantine": in_quarantine})
    return dg.AssetCheckResult(passed=not problems, metadata={
        "files_checked": len(entries), "problems": dg.MetadataValue.json(problems)})


#: Objects larger than this are not recounted (pure Python would take long).
RECOUNT_LIMIT_BYTES = 64 << 20


def independent_counts(declaration: TableDeclaration, storage: LakeStorage, spark: SparkSession,
                       entries: list[dict], dms: DmsLayout | None = None) -> dict[tuple[str, str], int]:
    """Records per object per Python's csv module, counted on the engine (objects it cannot judge
    are left out: see `record_count`)."""
    chosen = [(e["source_file"], e["source_etag"]) for e in entries
              if (e["source_size"] or 0) <= RECOUNT_LIMIT_BYTES]
    if not chosen:
        return {}
    widths = sorted({len(c.names) for c in declaration.contracts})
    dms = dms or DmsLayout()  # the header decision (layout.py) reads no setting
    endpoint, bucket, region = storage.endpoint_url, storage.bucket, storage.region

    def recount(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import boto3

        client = boto3.client("s3", endpoint_url=endpoint, region_name=region,
                              aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID"),
                              aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY"))
        for batch in batches:
            for row in batch.to_pylist():
                got = client.get_object(Bucket=bucket, Key=row["key"])
                count = None
                source = declaration.source(row["key"])  # None: a prefix no longer declared
                if got["ETag"].strip('"') == row["etag"] and source is not None:
                    data = got["Body"].read()
                    count = record_count(data, file_layout(declaration, source, data, dms).header, widths,
                                         source.delimiter)
                yield pa.RecordBatch.from_pylist([{"key": row["key"], "etag": row["etag"], "count": count}],
                                                 schema=_COUNTS)
    objects = spark.createDataFrame(chosen, "key STRING, etag STRING")
    counted = objects.mapInArrow(recount, "key STRING, etag STRING, count BIGINT").collect()
    return {(r["key"], r["etag"]): int(r["count"]) for r in counted if r["count"] is not None}


_COUNTS = pa.schema([("key", pa.string()), ("etag", pa.string()), ("count", pa.int64())])


def record_count(data: bytes, header: bool, widths: list[int], delimiter: str = ",") -> int | None:
    """Records in `data` per Python's csv module (a header is not one; a row may lead with DMS's
    operation and timestamp fields). None when it is not UTF-8 text or its quoting is broken: a quote left
    open at the end, or a record spanning lines with the wrong field count (there the lake's
    parser refuses the line the quote opened on and reads on, where a plain CSV reader swallows
    the lines after it into one record)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    expected = {w + extra for w in widths for extra in (0, 1, 2)}
    records, line = 0, 0
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        for row in reader:
            spans_lines, line = reader.line_num > line + 1, reader.line_num
            if row and len(row) not in expected and spans_lines:
                return None
            records += bool(row)
    except csv.Error:
        return None
    return records - 1 if header and records else records


def feed_covers_table(declaration: TableDeclaration, storage: LakeStorage, spark: SparkSession) -> dg.AssetCheckResult:
    tables = table_set(declaration)
    table = open_table(storage, tables.table)
    through = covered_through(storage, tables.changes)
    if table is None:
        return dg.AssetCheckResult(passed=through is None, metadata={"note": "table not created yet"})
    start = 0 if through is None else through + 1
    missing = [v for v in range(start, table.version() + 1) if _has_changes(declaration, storage, spark, v)]
    return dg.AssetCheckResult(
        passed=not missing and (through is None or through <= table.version()),
        metadata={"table_version": table.version(), "feed_through_version": -1 if through is None else through,
                  "versions_missing": dg.MetadataValue.json(missing)})


def _has_changes(declaration: TableDeclaration, storage: LakeStorage, spark: SparkSession, version: int) -> bool:
    """Whether `version` changed a row (derived on the engine from the files it removed and added)."""
    tables = table_set(declaration)
    commit = read_commit(storage, tables.table, version)
    if not commit.added and not commit.removed:
        return False
    columns, keys = table_columns(declaration), list(declaration.keys)
    schema = spark.read.format("delta").load(tables.table.uri(storage)).schema
    removed, added = feed.commit_files(spark, storage, tables.table, schema, commit)
    return bool(feed.change_rows(removed, added, keys, columns, version, commit.timestamp).limit(1).count())


def history_matches_table(declaration: TableDeclaration, storage: LakeStorage,
                          spark: SparkSession) -> dg.AssetCheckResult:
    """The history's current rows equal the table's rows (data columns), one per key."""
    tables = table_set(declaration)
    live = _exists(storage, tables.table)
    if open_table(storage, tables.history) is None or not live:
        passed = not live or _read(spark, storage, tables.table).limit(1).count() == 0
        return dg.AssetCheckResult(passed=passed, metadata={"note": "no history yet"})
    data = declaration.written  # `except_columns` are stored in neither
    keys = list(declaration.keys)
    current = spark.read.format("delta").load(tables.history.uri(storage)).where(F.col(IS_CURRENT)).select(*data)
    table = _read(spark, storage, tables.table).select(*data)
    counts = _same(current, table, keys) or _differences(current, table, keys)
    passed = counts["keys_with_several_current_rows"] == 0 and counts["rows_only_in_history"] == 0 \
        and counts["rows_only_in_table"] == 0
    return dg.AssetCheckResult(passed=passed, metadata=counts)


def _same(current: DataFrame, table: DataFrame, keys: list[str]) -> dict[str, int] | None:
    """The counts of `current` against `table` when they hold the same rows, one per key, else
    None: a cheaper query than `_differences` (each side read once and aggregated, no shuffle of
    whole rows), comparing row counts, the current rows' distinct keys, and the sums of the rows'
    64-bit hashes (each column's NULL flag hashed too: xxhash64 skips a NULL, which would make a
    NULL and a value of two columns trade places unseen)."""
    columns = current.columns
    digest = F.sum(F.xxhash64(*columns, *[F.col(c).isNull() for c in columns]).cast("decimal(38,0)"))
    found = current.agg(F.count(F.lit(1)).alias("h"), digest.alias("h_digest"), F.count_distinct(*keys).alias("k")) \
        .crossJoin(table.agg(F.count(F.lit(1)).alias("t"), digest.alias("t_digest"))).collect()[0]
    if found["h"] != found["t"] or found["k"] != found["h"] or found["h_digest"] != found["t_digest"]:
        return None
    return {"current_rows": int(found["h"]), "table_rows": int(found["t"]), "keys_with_several_current_rows": 0,
            "rows_only_in_history": 0, "rows_only_in_table": 0}


def _differences(current: DataFrame, table: DataFrame, keys: list[str]) -> dict[str, int]:
    """The counts of `current` (the history's current rows) against `table`, in one query that
    reads each once: the two stacked, counted per distinct row (a row's surplus on one side is
    what EXCEPT ALL leaves of it), then per key."""
    columns = current.columns
    both = (current.select(*columns, F.lit(1).alias("_h"), F.lit(0).alias("_t"))
            .unionByName(table.select(*columns, F.lit(0).alias("_h"), F.lit(1).alias("_t"))))
    rows = both.groupBy(*columns).agg(F.sum("_h").alias("h"), F.sum("_t").alias("t"))
    per_key = rows.groupBy(*keys).agg(
        F.sum("h").alias("h"), F.sum("t").alias("t"),
        F.sum(F.greatest(F.col("h") - F.col("t"), F.lit(0))).alias("only_h"),
        F.sum(F.greatest(F.col("t") - F.col("h"), F.lit(0))).alias("only_t"))
    total = per_key.agg(
        F.sum("h").alias("current_rows"), F.sum("t").alias("table_rows"),
        F.sum(F.when(F.col("h") > 1, 1).otherwise(0)).alias("keys_with_several_current_rows"),
        F.sum("only_h").alias("rows_only_in_history"), F.sum("only_t").alias("rows_only_in_table")).collect()[0]
    return {name: int(total[name] or 0) for name in ("current_rows", "table_rows", "keys_with_several_current_rows",
                                                      "rows_only_in_history", "rows_only_in_table")}
