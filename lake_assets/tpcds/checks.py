"""Asset checks on the TPC-DS star, each verifying the tables independently of the loader.

- rows per object: every fact object's lines are applied, superseded or quarantined
  (ledger), the quarantine holds exactly that many of its lines, and the table held exactly
  the applied rows carrying the object's sequence in the snapshot its load committed (time
  travel, so later corrections and loads do not blur the comparison);
- rows accounted: every row of the table now carries the sequence of an object the ledger
  says is applied, and no object has more rows than it applied (the difference is what
  later changes superseded or deleted: the ledger does not count those per object, so
  this side is a bound, not an equality);
- key unique (engine); referential integrity from the fact to every dimension, unknown keys
  counted and shown, not dropped (engine; a warning, since late dimensions are normal);
- schema equals the declared one (pyiceberg); freshness: the newest raw day is loaded.
The `evaluate_*` functions take a reachable storage and are tested without Dagster.
"""

from collections import Counter

import dagster as dg
import pyarrow.compute as pc
from deltalake import DeltaTable

from lake_assets.core.formats import iceberg
from lake_assets.core.formats.delta import open_table as open_delta
from lake_assets.core.ledger import APPLIED, APPROVED, HELD, Ledger
from lake_assets.core.tables import TPCDS_QUARANTINE, table
from lake_assets.declared.checks import schema_matches_contract
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.tpcds.assets import CORRECTIONS_KEY, DIMENSION_KEYS, WEB_SALES_KEY, asset_key
from lake_assets.tpcds.load import DAILY as DAILY_KIND
from lake_assets.tpcds.layout import fact_objects
from lake_assets.tpcds.schema import (
    DECLARATIONS,
    DIMENSIONS,
    FOREIGN_KEYS,
    KEYS,
    QUARANTINES,
    SEQUENCE,
    TpcdsTable,
    engine_name,
    ledger_name,
    table_columns,
)
from lake_assets.tpcds.sequencing import object_prefix, object_prefix_sql

WEB_SALES = ledger_name(TpcdsTable.WEB_SALES)  # in the ledger
WEB_SALES_SQL = engine_name(TpcdsTable.WEB_SALES)  # in the engine's SQL
_ICEBERG_TYPES = {"BIGINT": "long", "STRING": "string", "DATE": "date"}


def _result(passed: bool, severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR, **metadata) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=passed, severity=severity, metadata=metadata)


# --- rows per partition ----------------------------------------------------------

def evaluate_rows_match_raw(storage: LakeStorage, engine: SparkEngine) -> dg.AssetCheckResult:
    entries = Ledger(storage).entries(WEB_SALES)
    entries = entries.filter(pc.equal(entries["source_kind"], DAILY_KIND)).to_pylist()
    latest = {}
    for entry in entries:  # oldest first: the last entry per object is its current state
        latest[entry["source_file"]] = entry
    quarantined = _quarantined_per_object(storage)
    problems: list[dict] = []
    rows_per_object: dict[int, dict] = {}
    for key, entry in latest.items():
        in_quarantine = quarantined.get((key, entry["source_etag"]), 0)
        if entry["status"] in (HELD, APPROVED) or entry["rows_in_file"] is None:
            # waiting for `lake approve` (its rejects quarantined), or refused unread (not text): nothing applied
            if in_quarantine != entry["rows_quarantined"]:
                problems.append({"object": key, "status": entry["status"], "in_quarantine": in_quarantine,
                                 "ledger_quarantined": entry["rows_quarantined"]})
            continue
        accounted = entry["rows_applied"] + entry["rows_superseded"] + entry["rows_quarantined"]
        if accounted != entry["rows_in_file"] or in_quarantine != entry["rows_quarantined"]:
            problems.append({"object": key, "lines": entry["rows_in_file"], "accounted": accounted,
                             "in_quarantine": in_quarantine, "ledger_quarantined": entry["rows_quarantined"]})
            continue
        snapshot, sequence = entry["table_version"], entry["source_sequence"]
        if snapshot is None or sequence is None:  # nothing committed, or loaded before rows carried a sequence
            continue
        if snapshot not in rows_per_object:
            rows_per_object[snapshot] = _rows_per_object(engine.session(storage), snapshot)
        held = rows_per_object[snapshot].get(object_prefix(sequence), 0)
        if held != entry["rows_applied"]:
            problems.append({"object": key, "applied": entry["rows_applied"], "rows_of_the_object": held,
                             "snapshot": snapshot})
    return _result(not problems, objects=len(latest), problems=dg.MetadataValue.json(problems[:50]),
                   mismatched_objects=len(problems))


def _quarantined_per_object(storage: LakeStorage) -> Counter:
    """The quarantined lines per (object, ETag) of web_sales' objects: in its own quarantine, and in
    `tpcds_quarantine`, where earlier releases put them (a line in both, an object quarantined then and
    loaded again since, counts once)."""
    lines: set[tuple[str, str, int]] = set()
    for quarantine in (QUARANTINES[TpcdsTable.WEB_SALES], TPCDS_QUARANTINE):
        delta: DeltaTable | None = open_delta(storage, quarantine)
        if delta is not None:
            rows = delta.to_pyarrow_table(columns=["source_file", "source_etag", "line_number"])
            lines.update(zip(rows["source_file"].to_pylist(), rows["source_etag"].to_pylist(),
                             rows["line_number"].to_pylist()))
    return Counter((key, etag) for key, etag, _ in lines)


def _rows_per_object(spark, snapshot_id: int) -> dict[str | None, int]:  # a SparkSession
    """Rows per object (the prefix of their `_sequence`) in the snapshot a load committed:
    later corrections and loads do not blur it, and a key another object of the same run
    superseded is not counted for this one."""
    rows = spark.sql(f"SELECT {object_prefix_sql(SEQUENCE)} AS base, count(*) AS n FROM {WEB_SALES_SQL} "
                     f"VERSION AS OF {int(snapshot_id)} GROUP BY 1").collect()
    return {r["base"]: int(r["n"]) for r in rows}


def evaluate_rows_accounted(storage: LakeStorage, engine: SparkEngine) -> dg.AssetCheckResult:
    if iceberg.open_table(storage, table(WEB_SALES)) is None:
        return _result(True, note="table not created yet")
    applied: dict[str, tuple[str, int]] = {}
    for entry in Ledger(storage).entries(WEB_SALES).to_pylist():  # oldest first: the latest entry per object wins
        if entry["source_sequence"] is not None:
            applied[object_prefix(entry["source_sequence"])] = (entry["source_file"], entry["rows_applied"]) \
                if entry["status"] == APPLIED else ("", 0)
    rows = engine.session(storage).sql(f"SELECT {object_prefix_sql(SEQUENCE)} AS base, count(*) AS n "
                                       f"FROM {WEB_SALES_SQL} GROUP BY 1").collect()
    problems, unsequenced = [], 0
    for row in rows:
        if row["base"] is None:
            unsequenced = int(row["n"])
            continue
        source, count = applied.get(row["base"], ("", 0))
        if int(row["n"]) > count:
            problems.append({"sequence": row["base"], "object": source, "rows": int(row["n"]), "applied": count})
    return _result(not problems, problems=dg.MetadataValue.json(problems[:50]), unaccounted_objects=len(problems),
                   rows_loaded_before_sequences=unsequenced)


@dg.asset_check(asset=WEB_SALES_KEY, blocking=True,
                description="Every row of web_sales carries the sequence of an applied object, and no object "
                            "holds more rows than the ledger says it applied.")
def web_sales_rows_accounted(storage: StorageResource, engine: SparkEngine) -> dg.AssetCheckResult:
    with storage.running() as running:
        return evaluate_rows_accounted(running, engine)


@dg.asset_check(asset=WEB_SALES_KEY, blocking=True,
                description="Every raw line of every day's object is applied, superseded or quarantined, and "
                            "the table held exactly the applied rows with the object's sequence in the "
                            "snapshot its load committed.")
def web_sales_rows_match_raw(storage: StorageResource, engine: SparkEngine) -> dg.AssetCheckResult:
    with storage.running() as running:
        return evaluate_rows_match_raw(running, engine)


# --- keys and references ----------------------------------------------------------

def evaluate_key_unique(storage: LakeStorage, engine: SparkEngine, name: str) -> dg.AssetCheckResult:
    if iceberg.open_table(storage, table(ledger_name(name))) is None:
        return _result(True, note="table not created yet")
    keys = ", ".join(KEYS[name])
    null_key = " OR ".join(f"{k} IS NULL" for k in KEYS[name])
    # ONE scan of the table (a merge-on-read table's scan applies its delete files, the cost of this check)
    row = engine.session(storage).sql(
        f"SELECT count_if(n > 1) AS duplicates, coalesce(sum(CASE WHEN n > 1 THEN n END), 0) AS rows, "
        f"coalesce(sum(CASE WHEN {null_key} THEN n END), 0) AS null_keys "
        f"FROM (SELECT {keys}, count(*) AS n FROM {engine_name(name)} GROUP BY {keys}) d"
    ).collect()[0]
    return _result(row["duplicates"] == 0 and row["null_keys"] == 0, duplicate_keys=int(row["duplicates"]),
                   rows_with_duplicate_keys=int(row["rows"]), rows_with_null_key=int(row["null_keys"]))


def evaluate_referential_integrity(storage: LakeStorage, engine: SparkEngine) -> dg.AssetCheckResult:
    if iceberg.open_table(storage, table(WEB_SALES)) is None:
        return _result(True, note="table not created yet")
    spark = engine.session(storage)
    missing_dims = [d for d in DIMENSIONS if iceberg.open_table(storage, table(ledger_name(d))) is None]
    unknown: dict[str, dict] = {}
    for column, dimension, key in FOREIGN_KEYS:
        if dimension in missing_dims:
            count = spark.sql(f"SELECT count({column}) AS n FROM {WEB_SALES_SQL}").collect()[0]["n"]
            unknown[column] = {"dimension": ledger_name(dimension), "unknown_rows": int(count), "examples": []}
            continue
        rows = spark.sql(
            f"SELECT f.{column} AS k, count(*) AS n FROM {WEB_SALES_SQL} f LEFT ANTI JOIN {engine_name(dimension)} d "
            f"ON f.{column} = d.{key} WHERE f.{column} IS NOT NULL GROUP BY f.{column} ORDER BY n DESC, k LIMIT 1000"
        ).collect()
        unknown[column] = {"dimension": ledger_name(dimension), "unknown_rows": sum(int(r["n"]) for r in rows),
                           "unknown_keys": len(rows), "examples": [int(r["k"]) for r in rows[:10]]}
    total = sum(v["unknown_rows"] for v in unknown.values())
    return _result(total == 0, dg.AssetCheckSeverity.WARN, unknown_rows=total,
                   by_column=dg.MetadataValue.json(unknown), dimensions_not_loaded=dg.MetadataValue.json(missing_dims))


@dg.asset_check(asset=WEB_SALES_KEY, blocking=True, description="(ws_item_sk, ws_order_number) is unique, never null.")
def web_sales_key_unique(storage: StorageResource, engine: SparkEngine) -> dg.AssetCheckResult:
    with storage.running() as running:
        return evaluate_key_unique(running, engine, TpcdsTable.WEB_SALES)


@dg.asset_check(asset=WEB_SALES_KEY, description="Fact keys found in every dimension; unknown keys counted and "
                                                 "shown (the rows stay in the table).")
def web_sales_referential_integrity(storage: StorageResource, engine: SparkEngine) -> dg.AssetCheckResult:
    with storage.running() as running:
        return evaluate_referential_integrity(running, engine)


@dg.asset_check(asset=CORRECTIONS_KEY, name="web_sales_key_unique_after_corrections", blocking=True,
                description="After the corrections, (ws_item_sk, ws_order_number) is still unique.")
def web_sales_key_unique_after_corrections(storage: StorageResource, engine: SparkEngine) -> dg.AssetCheckResult:
    with storage.running() as running:
        return evaluate_key_unique(running, engine, TpcdsTable.WEB_SALES)


# --- schema and freshness ---------------------------------------------------------

def evaluate_schema(storage: LakeStorage, name: str) -> dg.AssetCheckResult:
    """web_sales' Iceberg schema against its loader's columns; a dimension's, which the change core
    applies, against its declaration (the core's check: its columns, then the audit columns)."""
    if name != TpcdsTable.WEB_SALES:
        return schema_matches_contract(DECLARATIONS[name], storage)
    current = iceberg.open_table(storage, table(ledger_name(name)))
    if current is None:
        return _result(True, note="table not created yet")
    actual = [(f.name, str(f.field_type)) for f in current.schema().fields]
    expected = [(c, _ICEBERG_TYPES.get(t, t.lower().replace(",", ", "))) for c, t in table_columns(name)]
    return _result(actual == expected, expected=dg.MetadataValue.json(expected), actual=dg.MetadataValue.json(actual))


def _schema_check(name: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=asset_key(name), name=f"{name}_schema_matches", blocking=True,
                    description=f"The Iceberg schema of {ledger_name(name)} equals the declared TPC-DS columns"
                                + ("." if name == TpcdsTable.WEB_SALES else ", then the change core's audit columns."))
    def check(storage: StorageResource) -> dg.AssetCheckResult:
        with storage.running() as running:
            return evaluate_schema(running, name)

    return check


def evaluate_freshness(storage: LakeStorage) -> dg.AssetCheckResult:
    objects = fact_objects(storage)
    days = sorted(d for d in objects if d is not None)
    if not days:
        return _result(True, note="no fact objects in the raw zone")
    newest = days[-1]
    done = Ledger(storage).done(WEB_SALES)
    obj = objects[newest]
    loaded_keys = {key for key, _ in done}  # a day loaded before its object was delivered again counts
    loaded_days = [day for day, loaded in objects.items() if day is not None and loaded.key in loaded_keys]
    newest_loaded = max(loaded_days) if loaded_days else None
    return _result((obj.key, obj.etag) in done, dg.AssetCheckSeverity.WARN, newest_raw_day=newest.isoformat(),
                   newest_loaded_day=newest_loaded.isoformat() if newest_loaded else "")


@dg.asset_check(asset=WEB_SALES_KEY, description="The newest day in the raw zone is loaded (its current object).")
def web_sales_freshness(storage: StorageResource) -> dg.AssetCheckResult:
    with storage.running() as running:
        return evaluate_freshness(running)


@dg.asset_check(asset=DIMENSION_KEYS[0], name="date_dim_key_unique", blocking=True,
                description="d_date_sk is unique and never null.")
def date_dim_key_unique(storage: StorageResource, engine: SparkEngine) -> dg.AssetCheckResult:
    with storage.running() as running:
        return evaluate_key_unique(running, engine, TpcdsTable.DATE_DIM)


TPCDS_CHECKS = [
    web_sales_rows_match_raw, web_sales_key_unique, web_sales_referential_integrity, web_sales_freshness,
    web_sales_key_unique_after_corrections, web_sales_rows_accounted,
    date_dim_key_unique, *[_schema_check(name) for name in (TpcdsTable.WEB_SALES, *DIMENSIONS)],
]
