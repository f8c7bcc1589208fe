"""Asset checks on `insurance`, run after each materialization in the same job.

Each check verifies the table independently of the code that wrote it: delta-rs reads the
log and data files (a second reader), Python's csv module recounts the raw files.
"""

import csv
import io
import json

import dagster as dg
import numpy as np
import pyarrow.compute as pc

from lake_assets.core import change_feed, scd2
from lake_assets.core.dms import DmsLayout
from lake_assets.core.formats.delta import open_table
from lake_assets.insurance.contract import CONTRACTS, DELTA_TYPES, KEY, TABLE, current as current_contract, table_columns
from lake_assets.core.ledger import HELD, Ledger
from lake_assets.insurance.layout import file_layout
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.core.tables import INSURANCE, INSURANCE_CHANGES, INSURANCE_HISTORY, INSURANCE_QUARANTINE



def _latest_metadata(context: dg.AssetCheckExecutionContext) -> dict:
    event = context.instance.get_latest_materialization_event(dg.AssetKey(TABLE))
    if event is None or event.asset_materialization is None:
        return {}
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


@dg.asset_check(asset=TABLE, blocking=True, description="The Delta schema equals the declared contract.")
def insurance_schema_matches_contract(storage: StorageResource) -> dg.AssetCheckResult:
    with storage.running() as running:
        return _schema_matches_contract(running)


def _schema_matches_contract(storage: LakeStorage) -> dg.AssetCheckResult:
    delta = open_table(storage, INSURANCE)
    if delta is None:
        return dg.AssetCheckResult(passed=True, metadata={"note": "table not created yet"})
    actual = [(f["name"], f["type"]) for f in json.loads(delta.schema().to_json())["fields"]]
    expected = [(c.name, DELTA_TYPES[c.sql_type]) for c in table_columns()]
    return dg.AssetCheckResult(
        passed=actual == expected,
        metadata={"expected": dg.MetadataValue.json(expected), "actual": dg.MetadataValue.json(actual)},
    )


@dg.asset_check(asset=TABLE, blocking=True, description=f"`{KEY}` is unique and never null.")
def insurance_key_unique_not_null(storage: StorageResource, engine: SparkEngine) -> dg.AssetCheckResult:
    with storage.running() as running:
        return _key_unique_not_null(running, engine)


def _key_unique_not_null(storage: LakeStorage, engine: SparkEngine) -> dg.AssetCheckResult:
    if open_table(storage, INSURANCE) is None:
        return dg.AssetCheckResult(passed=True, metadata={"note": "table not created yet"})
    row = engine.session(storage).sql(
        f"SELECT count(*) AS n, count({KEY}) AS keyed, count(DISTINCT {KEY}) AS distinct_keys "
        f"FROM delta.`{INSURANCE.uri(storage)}`"
    ).collect()[0]
    return dg.AssetCheckResult(
        passed=row["n"] == row["keyed"] == row["distinct_keys"],
        metadata={"rows": row["n"], "null_keys": row["n"] - row["keyed"], "duplicate_keys": row["keyed"] - row["distinct_keys"]},
    )


@dg.asset_check(
    asset=TABLE, blocking=True,
    description="For every commit of the run: rows before + inserted - deleted = rows after, counted by delta-rs.",
)
def insurance_row_count_reconciles(context: dg.AssetCheckExecutionContext, storage: StorageResource) -> dg.AssetCheckResult:
    with storage.running() as running:
        return _row_count_reconciles(_latest_metadata(context), running)


def _row_count_reconciles(metadata: dict, storage: LakeStorage) -> dg.AssetCheckResult:
    commits = metadata.get("commits") or []
    problems, previous = [], metadata.get("rows_before", 0)
    for commit in commits:
        version = commit["version"]
        before = _count(storage, version - 1) if version > 0 else 0
        after = _count(storage, version)
        if before + commit["inserted"] - commit["deleted"] != after:
            problems.append(f"v{version}: {before} + {commit['inserted']} - {commit['deleted']} != {after}")
        previous = after
    return dg.AssetCheckResult(
        passed=not problems and previous == metadata.get("rows_after", previous),
        metadata={"commits_checked": len(commits), "problems": dg.MetadataValue.json(problems)},
    )


def _count(storage: LakeStorage, version: int) -> int:
    delta = open_table(storage, INSURANCE, version=version)
    return delta.to_pyarrow_dataset().count_rows() if delta else 0


@dg.asset_check(
    asset=TABLE, blocking=True,
    description="Every raw row of the run's files is applied, superseded, quarantined or held; "
                "the quarantine table holds exactly the quarantined ones.",
)
def insurance_rows_conserved(context: dg.AssetCheckExecutionContext, storage: StorageResource) -> dg.AssetCheckResult:
    with storage.running() as running:
        return _rows_conserved(context.run.run_id, running)


def _rows_conserved(run_id: str, storage: LakeStorage) -> dg.AssetCheckResult:
    entries = Ledger(storage).entries(TABLE)
    entries = entries.filter(pc.equal(entries["run_id"], run_id)).to_pylist()
    quarantine = open_table(storage, INSURANCE_QUARANTINE)
    quarantined: dict[tuple[str, str], int] = {}
    if quarantine is not None:
        for row in quarantine.to_pyarrow_dataset().to_table(columns=["source_file", "source_etag"]).to_pylist():
            quarantined[(row["source_file"], row["source_etag"])] = quarantined.get(
                (row["source_file"], row["source_etag"]), 0) + 1
    problems = []
    for entry in entries:
        accounted = entry["rows_applied"] + entry["rows_superseded"] + entry["rows_quarantined"]
        if entry["status"] == HELD and accounted == entry["rows_quarantined"]:
            accounted = entry["rows_in_file"]  # its valid rows wait for `lake approve`
        in_quarantine = quarantined.get((entry["source_file"], entry["source_etag"]), 0)
        recount = _independent_record_count(storage, entry["source_file"], entry["source_kind"],
                                            entry["source_size"])
        if accounted != entry["rows_in_file"] or in_quarantine != entry["rows_quarantined"] \
                or (recount is not None and recount != entry["rows_in_file"]):
            problems.append({"file": entry["source_file"], "rows_in_file": entry["rows_in_file"],
                             "independent_count": recount, "accounted": accounted, "in_quarantine": in_quarantine})
    return dg.AssetCheckResult(
        passed=not problems,
        metadata={"files_checked": len(entries), "problems": dg.MetadataValue.json(problems)},
    )


RECOUNT_LIMIT_BYTES = 64 << 20


def _independent_record_count(storage: LakeStorage, key: str, kind: str, size: int) -> int | None:
    """Records in the raw object per Python's csv module.

    None when it is not UTF-8 text, too large to recount in pure Python quickly, or its
    quoting is broken: a quote left open at the end, or a record spanning lines with the
    wrong field count (there the parser rejects the line the quote opened on and reads on,
    where a plain CSV reader would swallow the lines after it into one record).
    """
    if size > RECOUNT_LIMIT_BYTES:
        return None
    data, _ = storage.get_bytes(key)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    expected = {len(c.columns) + extra for c in CONTRACTS for extra in (0, 1, 2)}  # DMS's operation, timestamp
    records, line = 0, 0
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        for row in reader:
            spans_lines, line = reader.line_num > line + 1, reader.line_num
            if row and len(row) not in expected and spans_lines:
                return None
            records += bool(row)
    except csv.Error:
        return None
    return records - file_layout(kind, data, DmsLayout()).header  # a header is no record (insurance/layout.py)


@dg.asset_check(
    asset=INSURANCE_HISTORY.name, blocking=True,
    description="SCD2: one current row per live policy, and the current rows equal `insurance` (data columns).",
)
def insurance_history_matches_table(storage: StorageResource) -> dg.AssetCheckResult:
    with storage.running() as running:
        return _history_matches_table(running)


def _history_matches_table(storage: LakeStorage) -> dg.AssetCheckResult:
    table = open_table(storage, INSURANCE)
    current = scd2.current_rows(storage, INSURANCE_HISTORY)
    data_columns = current_contract().names
    live = table.to_pyarrow_dataset().to_table(columns=data_columns) if table else None
    if current is None or live is None:
        passed = live is None or live.num_rows == 0
        return dg.AssetCheckResult(passed=passed, metadata={"note": "no history yet"})
    current = current.select(data_columns)
    keys = current[KEY].to_numpy(zero_copy_only=False)
    duplicated = int(len(keys) - len(np.unique(keys)))
    ordered = [(KEY, "ascending")]
    equal = duplicated == 0 and current.sort_by(ordered).equals(live.sort_by(ordered))
    return dg.AssetCheckResult(passed=equal, metadata={
        "current_rows": current.num_rows, "table_rows": live.num_rows, "keys_with_several_current_rows": duplicated,
        "keys_only_in_table": len(np.setdiff1d(live[KEY].to_numpy(zero_copy_only=False), keys)),
        "keys_only_in_history": len(np.setdiff1d(keys, live[KEY].to_numpy(zero_copy_only=False))),
    })


@dg.asset_check(
    asset=INSURANCE_CHANGES.name, blocking=True,
    description="The feed covers every version of `insurance`: no version newer than the feed's newest has changes "
                "left to derive, and the feed has no version the table lacks.",
)
def insurance_changes_cover_table(storage: StorageResource) -> dg.AssetCheckResult:
    with storage.running() as running:
        return _changes_cover_table(running)


def _changes_cover_table(storage: LakeStorage) -> dg.AssetCheckResult:
    table = open_table(storage, INSURANCE)
    through = change_feed.covered_through(storage, INSURANCE_CHANGES)
    if table is None:
        return dg.AssetCheckResult(passed=through is None, metadata={"note": "table not created yet"})
    start = 0 if through is None else through + 1
    dataset = table.to_pyarrow_dataset()
    missing = [v for v in range(start, table.version() + 1)
               if change_feed.derive(storage, INSURANCE, KEY, v, dataset).num_rows]
    return dg.AssetCheckResult(
        passed=not missing and (through is None or through <= table.version()),
        metadata={"table_version": table.version(), "feed_through_version": -1 if through is None else through,
                  "versions_missing": dg.MetadataValue.json(missing)},
    )


INSURANCE_CHECKS = [
    insurance_schema_matches_contract,
    insurance_key_unique_not_null,
    insurance_row_count_reconciles,
    insurance_rows_conserved,
    insurance_changes_cover_table,
    insurance_history_matches_table,
]
