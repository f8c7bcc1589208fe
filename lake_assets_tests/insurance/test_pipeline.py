"""The insurance pipeline end to end: raw objects on a real S3 server -> Sail -> Delta.

Every test gets a fresh bucket (see conftest.py); the tables are read back both through
the engine (Spark) and independently (delta-rs, DuckDB).
"""

import datetime as dt
import importlib.util
import random
import re
import uuid
from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.dms import DmsLayout
from lake_assets.core.formats.delta import current_version, open_table, to_arrow
from lake_assets.core.sequence import origin
from lake_assets_tests.helpers.insurance_tables import DATA_COLUMN_NAMES, Reason
from lake_assets.core.errors import UsageError
from lake_assets_tests.helpers.insurance import (
    STAGING,
    IngestRules,
    apply_pending,
    approve_held,
    pending_objects,
)
from lake_assets.core.apply import bookkeeping, commit as committing
from lake_assets.core.apply.run import apply_pending as apply_declared
from lake_assets.core.apply.plan import raw_files
from lake_assets.core.declaration import SourceKind
from lake_assets.core.registry import declaration
from lake_assets.core.ledger import REVERTED, APPLIED, APPROVED, HELD, REJECTED, Ledger
from lake_assets.resources.embedded_s3 import free_port
from lake_assets.resources.storage import LakeStorage, StorageUnavailable
from lake_assets_tests.helpers.insurance_tables import INSURANCE, INSURANCE_HISTORY, INSURANCE_QUARANTINE, \
    INSURANCE_TOMBSTONES
from lake_assets_tests.conftest import DATA, make_storage

INSURANCE_DECLARATION = declaration("insurance")

HEADER = ",".join(DATA_COLUMN_NAMES)
SEED_KEYS = (100462, 100463, 100475, 110001, 110002)
CDC_1, CDC_2 = "raw/cdcload/20240401-090000000.csv", "raw/cdcload/20240402-090000000.csv"
FULL = "raw/fullload/full-load.csv"


# --- helpers -------------------------------------------------------------------------

def put(storage: LakeStorage, key: str, body: str | bytes) -> str:
    return storage.put_bytes(key, body.encode() if isinstance(body, str) else body)


def put_seed(storage: LakeStorage, *keys: str) -> None:
    for key in keys:
        put(storage, key, (DATA / key.removeprefix("raw/")).read_bytes())


def row(policy_id: int, value: int = 1000, flood: str = "N", date: str = "2024-01-31") -> str:
    """The data fields of one policy (no operation), with a recognisable insured value."""
    return f"{policy_id},{date},Urban,CA,West,{value},Retail,N,{flood}"


def full_load(*rows: str) -> str:
    return "\n".join([HEADER, *rows]) + "\n"


def cdc(*rows: str) -> str:
    return "\n".join(rows) + "\n"


def table(storage: LakeStorage) -> dict[int, dict]:
    """The table's data columns by key, read by delta-rs."""
    delta = open_table(storage, INSURANCE)
    if delta is None:
        return {}
    rows = to_arrow(delta).select(DATA_COLUMN_NAMES).to_pylist()
    keyed = {r["policy_id"]: r for r in rows}
    assert len(keyed) == len(rows), "duplicate keys in the table"
    return keyed


def values(storage: LakeStorage) -> dict[int, int]:
    return {k: r["insured_value"] for k, r in table(storage).items()}


def engine_rows(spark: SparkSession, storage: LakeStorage, keys=None) -> list[tuple]:
    frame = spark.read.format("delta").load(INSURANCE.uri(storage))
    if keys is not None:
        frame = frame.where(frame.policy_id.isin(list(keys)))
    return [tuple(r) for r in frame.select(*DATA_COLUMN_NAMES).orderBy("policy_id").collect()]


def version(storage: LakeStorage) -> int | None:
    return current_version(storage, INSURANCE)


def ledger(storage: LakeStorage) -> dict[str, dict]:
    """Ledger entries by source file (the latest entry wins)."""
    return {e["source_file"]: e for e in Ledger(storage).entries("insurance").to_pylist()}


def quarantine(storage: LakeStorage) -> list[dict]:
    delta = open_table(storage, INSURANCE_QUARANTINE)
    if delta is None:
        return []
    return to_arrow(delta).sort_by([("source_file", "ascending"), ("line_number", "ascending")]).to_pylist()


def assert_conserved(storage: LakeStorage) -> None:
    """Each file's latest ledger entry accounts for each row of the file, and its quarantine
    rows exist (a file refused for undeclared columns and applied after the contract grew
    has its refusal's rows released)."""
    parked = quarantine(storage)
    latest = {(e["source_file"], e["source_etag"]): e for e in Ledger(storage).entries("insurance").to_pylist()}
    for entry in latest.values():
        mine = [q for q in parked if q["source_file"] == entry["source_file"] and q["source_etag"] == entry["source_etag"]]
        assert len(mine) == entry["rows_quarantined"], entry
        if entry["status"] in (HELD, APPROVED):  # its valid rows wait for `lake approve`
            assert entry["rows_applied"] == entry["rows_superseded"] == 0, entry
            assert entry["rows_in_file"] >= entry["rows_quarantined"], entry
            continue
        assert entry["rows_in_file"] == entry["rows_applied"] + entry["rows_superseded"] + entry["rows_quarantined"], entry
        if entry["rows_applied"] or entry["rows_superseded"]:
            assert entry["status"] in (APPLIED, REVERTED), entry
        elif entry["rows_quarantined"] and entry["source_kind"] == "fullload":  # approved, it still deleted older keys
            assert entry["status"] in (APPLIED, REVERTED, REJECTED), entry
        elif entry["rows_quarantined"]:
            assert entry["status"] == REJECTED, entry
        else:  # a file without records: applied, unless refused whole (no header, late)
            assert entry["status"] in (APPLIED, REJECTED), entry


def run(storage: LakeStorage, spark: SparkSession):
    report = apply_pending(storage, spark, f"run-{uuid.uuid4().hex[:8]}")
    assert_conserved(storage)
    assert storage.list_objects(STAGING) == []  # staged batches are cleaned up
    return report


def drop_bucket(storage: LakeStorage) -> None:
    """Remove a bucket a test made for itself (SeaweedFS gives each bucket its own volumes)."""
    try:
        storage.delete_prefix("")
        storage.get_client().delete_bucket(Bucket=storage.bucket)
    except Exception:  # noqa: BLE001 - best effort: a leftover bucket only costs disk
        pass


def closed_endpoint() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


def duckdb_rows(storage: LakeStorage, tmp_path: Path) -> list[tuple]:
    """The table read by DuckDB's delta extension: an engine that shares no code with ours."""
    con = duckdb.connect()
    con.execute(f"LOAD '{_extension('duckdb_extension_delta')}'")
    httpfs = _extension("duckdb_extension_httpfs")
    if httpfs:
        options = storage.delta_storage_options()
        con.execute(f"LOAD '{httpfs}'")
        con.execute(
            f"CREATE SECRET (TYPE s3, KEY_ID '{options['AWS_ACCESS_KEY_ID']}', "
            f"SECRET '{options['AWS_SECRET_ACCESS_KEY']}', ENDPOINT '{storage.endpoint_url.split('://', 1)[1]}', "
            "URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')")
        location = INSURANCE.uri(storage)
    else:
        # DuckDB's S3 secrets live in the httpfs extension, which it would download at run time
        # (impossible offline) unless the `duckdb-extension-httpfs` wheel is installed. Without
        # it, DuckDB reads a byte-for-byte copy of the table's objects (log and data files)
        # taken from the bucket: still an independent reader of exactly what is in S3.
        location = tmp_path / "insurance-copy"
        prefix = INSURANCE.prefix + "/"
        for obj in storage.list_objects(prefix):
            target = location / obj["Key"].removeprefix(prefix)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(storage.get_bytes(obj["Key"])[0])
    columns = ", ".join(DATA_COLUMN_NAMES)
    return con.execute(f"SELECT {columns} FROM delta_scan('{location}') ORDER BY policy_id").fetchall()


def _extension(package: str) -> str | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(spec.submodule_search_locations[0]).rglob("*.duckdb_extension"))
    return str(found[0]) if found else None


# --- the seed's scenario ---------------------------------------------------------------

SEED_BEFORE = [
    (100462, dt.date(2023, 4, 28), "Urban", "MA", "Northeast", 3217600, "Retail", "N", "Y"),
    (100463, dt.date(2023, 3, 27), "Urban", "NY", "East", 15480000, "Office Bldg", "Y", "Y"),
    (100475, dt.date(2023, 5, 2), "Rural", "LA", "South", 512800, "Farming", "N", "N"),
]
SEED_AFTER = [
    (100462, dt.date(2024, 12, 31), "Urban", "MA", "Northeast", 3217600, "Retail", "N", "Y"),
    (100463, dt.date(2023, 3, 27), "Urban", "NY", "East", 1000000, "Office Bldg", "Y", "Y"),
    (100475, dt.date(2023, 5, 2), "Rural", "LA", "South", 512800, "Farming", "N", "Y"),
    (110001, dt.date(2024, 3, 31), "Urban", "CA", "WEST", 210000, "Office Bldg", "N", "N"),
    (110002, dt.date(2024, 5, 31), "Urban", "TX", "South", 345000, "Retail", "N", "Y"),
]
ROW_100580 = (100580, dt.date(2023, 3, 30), "Urban", "NH", "Northeast", 97920, "Office Bldg", "Y", "Y")
ROW_100617 = (100617, dt.date(2023, 3, 27), "Urban", "VT", "Northeast", 8861500, "Office Bldg", "N", "N")


def test_seed_full_load_then_cdc_batches(storage: LakeStorage, spark: SparkSession, tmp_path: Path) -> None:
    put_seed(storage, FULL)
    report = run(storage, spark)
    assert (report.version_before, report.version_after, report.rows_after) == (None, 0, 25)
    assert len(table(storage)) == 25
    assert engine_rows(spark, storage, SEED_KEYS) == SEED_BEFORE
    assert engine_rows(spark, storage, (100580, 100617)) == [ROW_100580, ROW_100617]
    entry = ledger(storage)[FULL]
    assert (entry["status"], entry["source_kind"], entry["rows_in_file"], entry["rows_applied"],
            entry["table_version"]) == (APPLIED, "fullload", 25, 25, 0)

    put_seed(storage, CDC_1)  # the blog post's batch
    report = run(storage, spark)
    assert (report.version_before, report.version_after, report.rows_after) == (0, 1, 27)
    assert (report.total("inserted"), report.total("updated"), report.total("deleted")) == (2, 3, 0)
    assert engine_rows(spark, storage, SEED_KEYS) == SEED_AFTER

    put_seed(storage, CDC_2)  # the later batch: a delete, an update and one bad row
    report = run(storage, spark)
    assert (report.version_before, report.version_after, report.rows_after) == (1, 2, 26)
    after = engine_rows(spark, storage)
    assert len(after) == 26
    keyed = {r[0]: r for r in after}
    assert 100617 not in keyed  # deleted
    assert keyed[100580] == ROW_100580  # its update had an impossible date: not applied
    assert keyed[110002][-1] == "N"  # dropped flood coverage
    assert [keyed[k] for k in SEED_KEYS[:4]] == SEED_AFTER[:4]

    parked = quarantine(storage)
    assert len(parked) == 1
    assert (parked[0]["source_file"], parked[0]["reason"], parked[0]["line_number"], parked[0]["raw_text"]) == (
        CDC_2, Reason.BAD_DATE.value, 3, "U,100580,2024-13-45,Urban,NH,Northeast,97920,Office Bldg,Y,Y")
    assert parked[0]["detail"] == "expiry_date=2024-13-45"

    entries = ledger(storage)
    assert [(entries[k]["rows_in_file"], entries[k]["rows_applied"], entries[k]["rows_superseded"],
             entries[k]["rows_quarantined"], entries[k]["table_version"]) for k in (CDC_1, CDC_2)] == [
        (5, 5, 0, 0, 1), (3, 2, 0, 1, 2)]

    # the audit columns say where each row came from
    audit = {r["policy_id"]: r for r in to_arrow(open_table(storage, INSURANCE)).to_pylist()}
    assert (audit[110002]["_operation"], audit[110002]["_source_file"], audit[110002]["_source_line"]) == ("U", CDC_2, 2)
    assert (audit[100462]["_operation"], audit[100462]["_source_file"], audit[100462]["_source_line"]) == ("U", CDC_1, 1)
    assert (audit[200358]["_operation"], audit[200358]["_source_file"], audit[200358]["_source_line"]) == ("L", FULL, 2)

    # a second, independent reader sees exactly what the engine sees
    assert duckdb_rows(storage, tmp_path) == after
    assert sorted(tuple(r.values()) for r in table(storage).values()) == after


def test_seed_cdc_batches_in_one_run_supersede_across_files(storage: LakeStorage, spark: SparkSession) -> None:
    put_seed(storage, FULL, CDC_1, CDC_2)
    report = run(storage, spark)
    assert [c.operation for c in report.commits] == ["full load"]  # one commit: snapshot and changes
    assert report.rows_after == 26
    entries = ledger(storage)
    # 110002's insert (file 1, line 5) is superseded by its update in file 2
    assert (entries[CDC_1]["rows_applied"], entries[CDC_1]["rows_superseded"]) == (4, 1)
    assert (entries[CDC_2]["rows_applied"], entries[CDC_2]["rows_quarantined"]) == (2, 1)
    assert entries[CDC_1]["table_version"] == entries[CDC_2]["table_version"] == entries[FULL]["table_version"] == 0
    rows = table(storage)
    assert rows[110002]["flood_coverage"] == "N" and 100617 not in rows
    assert rows[100462]["expiry_date"] == dt.date(2024, 12, 31)


# --- operations and ordering -----------------------------------------------------------

def test_insert_update_delete(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/fullload/a.csv", full_load(row(1, 10), row(2, 20), row(3, 30)))
    run(storage, spark)
    put(storage, "raw/cdcload/20240101-000000001.csv", cdc(
        f"I,{row(4, 40)}",
        f"U,{row(2, 21, flood='Y')}",
        "D,3,,,,,,,,",
        "D,99,,,,,,,,",          # delete of an absent key: nothing to do
        f"U,{row(5, 50)}",        # update of an absent key: an upsert
        f"I,{row(1, 11)}",        # insert of a present key: an upsert
    ))
    report = run(storage, spark)
    assert values(storage) == {1: 11, 2: 21, 4: 40, 5: 50}
    assert table(storage)[2]["flood_coverage"] == "Y"
    assert (report.total("inserted"), report.total("updated"), report.total("deleted")) == (2, 2, 1)
    entry = ledger(storage)["raw/cdcload/20240101-000000001.csv"]
    assert (entry["rows_in_file"], entry["rows_applied"], entry["status"]) == (6, 6, APPLIED)
    assert report.version_after == report.version_before + 1


def test_duplicate_keys_within_a_file_last_row_wins(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/fullload/a.csv", full_load(row(1, 10), row(2, 20), row(1, 12), row(7, 70)))
    run(storage, spark)
    assert values(storage) == {1: 12, 2: 20, 7: 70}
    entry = ledger(storage)["raw/fullload/a.csv"]
    assert (entry["rows_in_file"], entry["rows_applied"], entry["rows_superseded"]) == (4, 3, 1)

    put(storage, "raw/cdcload/20240101-000000001.csv", cdc(
        f"I,{row(10, 1)}", f"U,{row(10, 2)}", f"U,{row(10, 3)}",  # 10 ends at 3
        f"I,{row(11, 1)}", "D,11,,,,,,,,",                         # 11 inserted then deleted
        "D,7,,,,,,,,", f"I,{row(7, 71)}",                          # 7 deleted then re-inserted
        f"U,{row(2, 21)}", "D,2,,,,,,,,",                          # 2 updated then deleted
    ))
    run(storage, spark)
    assert values(storage) == {1: 12, 7: 71, 10: 3}
    entry = ledger(storage)["raw/cdcload/20240101-000000001.csv"]
    assert (entry["rows_in_file"], entry["rows_applied"], entry["rows_superseded"], entry["rows_quarantined"]) == (
        9, 4, 5, 0)


def test_replayed_file_changes_nothing(storage: LakeStorage, spark: SparkSession) -> None:
    body = cdc(f"I,{row(1, 10)}", f"I,{row(2, 20)}", "U,3,2024-02-30,Urban,CA,West,1,Retail,N,Y")
    put(storage, "raw/cdcload/20240101-000000001.csv", body)
    run(storage, spark)
    before = (version(storage), values(storage), len(ledger(storage)), len(quarantine(storage)))
    assert before[0] is not None and before[3] == 1
    put(storage, "raw/cdcload/20240101-000000001.csv", body)  # the same bytes again: same key, same ETag
    assert pending_objects(storage, Ledger(storage)) == []
    report = run(storage, spark)
    assert report.files == [] and report.commits == []
    assert (version(storage), values(storage), len(ledger(storage)), len(quarantine(storage))) == before
    assert len(Ledger(storage).entries("insurance")) == 1


def test_files_put_out_of_key_order_apply_in_key_order(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/cdcload/20240502-000000000.csv", cdc(f"U,{row(1, 2)}", f"I,{row(2, 2)}"))
    put(storage, "raw/cdcload/20240501-000000000.csv", cdc(f"I,{row(1, 1)}", "D,2,,,,,,,,", f"I,{row(3, 1)}"))
    assert [o.key for o in raw_files(INSURANCE_DECLARATION, storage)] == ["raw/cdcload/20240501-000000000.csv", "raw/cdcload/20240502-000000000.csv"]
    run(storage, spark)
    assert values(storage) == {1: 2, 2: 2, 3: 1}
    entries = ledger(storage)
    assert (entries["raw/cdcload/20240501-000000000.csv"]["rows_applied"], entries["raw/cdcload/20240501-000000000.csv"]["rows_superseded"]) == (1, 2)
    assert (entries["raw/cdcload/20240502-000000000.csv"]["rows_applied"], entries["raw/cdcload/20240502-000000000.csv"]["rows_superseded"]) == (2, 0)


def test_late_file_applies_per_key_and_a_corrected_copy_wins(storage: LakeStorage, spark: SparkSession) -> None:
    """Before: a file sorting before an applied one was refused whole as `late_file`, and a
    corrected copy of the newest file was refused as late "after itself"."""
    put(storage, "raw/cdcload/20240502-000000000.csv", cdc(f"I,{row(1, 2)}"))
    run(storage, spark)
    put(storage, "raw/cdcload/20240501-000000000.csv", cdc(f"U,{row(1, 1)}", f"I,{row(9, 9)}", "garbage"))
    run(storage, spark)
    assert values(storage) == {1: 2, 9: 9}  # key 1 has a newer change; key 9 had none
    late = ledger(storage)["raw/cdcload/20240501-000000000.csv"]
    assert (late["status"], late["rows_applied"], late["rows_superseded"], late["rows_quarantined"]) == (
        APPLIED, 1, 1, 1)
    assert [(q["line_number"], q["reason"]) for q in quarantine(storage)] == [(3, "wrong_field_count")]

    put(storage, "raw/cdcload/20240502-000000000.csv", cdc(f"U,{row(1, 3)}"))  # same name, new content
    run(storage, spark)
    assert values(storage) == {1: 3, 9: 9}  # the second delivery of a file follows its first
    entry = ledger(storage)["raw/cdcload/20240502-000000000.csv"]
    assert (entry["status"], entry["rows_applied"]) == (APPLIED, 1)
    assert entry["source_sequence"].endswith(".0002.0000000000")

    put(storage, "raw/cdcload/20240503-000000000.csv", cdc(f"U,{row(1, 4)}"))
    run(storage, spark)
    assert values(storage) == {1: 4, 9: 9}
    sequences = {r["policy_id"]: r["_sequence"] for r in to_arrow(open_table(storage, INSURANCE)).to_pylist()}
    assert sequences == {1: f"20240503000000000000000.000000.{origin('raw/cdcload/20240503-000000000.csv')}"
                            ".0001.0000000001",
                         9: f"20240501000000000000000.000000.{origin('raw/cdcload/20240501-000000000.csv')}"
                            ".0001.0000000002"}


def test_redelivered_late_file_does_not_overwrite_newer_values(storage: LakeStorage, spark: SparkSession) -> None:
    """Before: re-delivering a late file under a newer name (as the README advised)
    overwrote newer values with older ones. Now its own name keeps its place in time."""
    put(storage, "raw/cdcload/20240401-090000000.csv", cdc(f"I,{row(1, 1)}", f"I,{row(2, 1)}"))
    put(storage, "raw/cdcload/20240403-090000000.csv", cdc(f"U,{row(1, 3)}"))
    run(storage, spark)
    put(storage, "raw/cdcload/20240402-090000000.csv", cdc(f"U,{row(1, 2)}", f"U,{row(2, 2)}"))
    run(storage, spark)
    assert values(storage) == {1: 3, 2: 2}
    entry = ledger(storage)["raw/cdcload/20240402-090000000.csv"]
    assert (entry["rows_applied"], entry["rows_superseded"]) == (1, 1)


def test_a_file_without_a_sequence_is_refused_and_blocks_nothing(storage: LakeStorage, spark: SparkSession) -> None:
    """Before: `manual-fix.csv` (or anything in a subfolder) sorted after every DMS file and
    made each later one `late_file`, forever."""
    put(storage, "raw/cdcload/20240401-090000000.csv", cdc(f"I,{row(1, 1)}"))
    put(storage, "raw/cdcload/manual-fix.csv", cdc(f"U,{row(1, 99)}", f"I,{row(7, 7)}"))
    put(storage, "raw/cdcload/2024/04/02/20240402-090000000.csv", cdc(f"I,{row(2, 2)}"))
    run(storage, spark)
    put(storage, "raw/cdcload/20240403-090000000.csv", cdc(f"U,{row(1, 3)}"))
    put(storage, "raw/cdcload/zz/2024/04/04/part-1.csv", cdc(f"U,{row(2, 4)}"))  # dated by its folders
    run(storage, spark)
    assert values(storage) == {1: 3, 2: 4}
    fix = ledger(storage)["raw/cdcload/manual-fix.csv"]
    assert (fix["status"], fix["rows_quarantined"]) == (REJECTED, 2)
    assert fix["detail"].startswith("no_sequence: ") and "YYYYMMDD-HHMMSSfff" in fix["detail"]
    assert {q["reason"] for q in quarantine(storage)} == {Reason.NO_SEQUENCE.value}


def test_ddmmyyyy_folders_apply_in_time_order(storage: LakeStorage, spark: SparkSession) -> None:
    """Before: DMS's DDMMYYYY partition folders applied in key order, not time order."""
    put(storage, "raw/cdcload/02032024/changes.csv", cdc(f"I,{row(1, 1)}"))   # 2 March
    put(storage, "raw/cdcload/01042024/changes.csv", cdc(f"U,{row(1, 2)}"))   # 1 April: sorts first
    apply_pending(storage, spark, "run-dd", IngestRules(DmsLayout(folder_date_format="DDMMYYYY")))
    assert values(storage) == {1: 2}
    entries = ledger(storage)
    assert entries["raw/cdcload/02032024/changes.csv"]["rows_superseded"] == 1
    assert entries["raw/cdcload/01042024/changes.csv"]["source_sequence"].startswith("20240401")


def test_late_insert_after_a_delete_inside_and_after_the_tombstone_window(
        storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/cdcload/20240401-090000000.csv", cdc(f"I,{row(1, 1)}", f"I,{row(2, 1)}"))
    put(storage, "raw/cdcload/20240403-090000000.csv", cdc("D,1,,,,,,,,", "D,2,,,,,,,,"))
    run(storage, spark)
    assert values(storage) == {}
    delete_file = "raw/cdcload/20240403-090000000.csv"
    tombs = {r["policy_id"]: (r["_sequence"], r["source_file"], r["source_line"])
             for r in to_arrow(open_table(storage, INSURANCE_TOMBSTONES)).to_pylist()}
    deleted = f"20240403090000000000000.000000.{origin(delete_file)}.0001"
    assert tombs == {1: (f"{deleted}.0000000001", delete_file, 1), 2: (f"{deleted}.0000000002", delete_file, 2)}

    put(storage, "raw/cdcload/20240402-090000000.csv", cdc(f"U,{row(1, 2)}"))  # older than the delete
    run(storage, spark)
    assert values(storage) == {}  # inside the window: not resurrected
    assert ledger(storage)["raw/cdcload/20240402-090000000.csv"]["rows_superseded"] == 1
    # the history places the late change before the delete, which closes it: the delete's own file and line
    key_1 = sorted((r["_sequence"], r["_operation"], r["_source_file"], r["_source_line"])
                   for r in to_arrow(open_table(storage, INSURANCE_HISTORY)).to_pylist() if r["policy_id"] == 1)
    assert [(op, file, line) for _, op, file, line in key_1] == [
        ("I", "raw/cdcload/20240401-090000000.csv", 1), ("U", "raw/cdcload/20240402-090000000.csv", 1),
        ("D", delete_file, 1)]

    put(storage, "raw/cdcload/20240402-100000000.csv", cdc(f"U,{row(2, 2)}"))
    apply_pending(storage, spark, "run-late", IngestRules(tombstone_retention=dt.timedelta(0)))
    assert values(storage) == {2: 2}  # after the window the delete is forgotten (documented)
    assert open_table(storage, INSURANCE_TOMBSTONES).count() == 0


@pytest.mark.parametrize("retention_days", [7, None])
def test_a_table_that_keeps_its_deletes_for_good_forgets_none(storage: LakeStorage, spark: SparkSession,
                                                              retention_days: float | None) -> None:
    """`tombstone_retention_days: null`: a delete a month old still keeps a late, older change out;
    under the default 7 days it is forgotten and the change brings its key back (documented)."""
    declared = INSURANCE_DECLARATION.model_copy(update={"tombstone_retention_days": retention_days})
    put(storage, "raw/cdcload/20240401-090000000.csv", cdc(f"I,{row(1, 1)}"))
    put(storage, "raw/cdcload/20240403-090000000.csv", cdc("D,1,,,,,,,,"))
    apply_declared(declared, storage, spark, "run-delete")
    month_ago = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=30)
    DeltaTable(INSURANCE_TOMBSTONES.uri(storage), storage_options=storage.delta_storage_options()).update(
        new_values={"deleted_at": month_ago})  # as if deleted a month ago
    put(storage, "raw/cdcload/20240402-090000000.csv", cdc(f"U,{row(1, 2)}"))  # older than the delete
    apply_declared(declared, storage, spark, "run-late")
    assert values(storage) == ({} if retention_days is None else {1: 2})
    assert open_table(storage, INSURANCE_TOMBSTONES).count() == (1 if retention_days is None else 0)


def test_tombstones_an_earlier_release_wrote_gain_the_line_of_later_deletes(
        storage: LakeStorage, spark: SparkSession) -> None:
    old_delete = f"20240403090000000000000.000000.{origin('raw/cdcload/old.csv')}.0001.0000000001"
    spark.createDataFrame(  # as an earlier release wrote them: no source_line column
        [(1, old_delete, "raw/cdcload/old.csv", dt.datetime.now(dt.timezone.utc))],  # inside the retention
        "policy_id INT, _sequence STRING, source_file STRING, deleted_at TIMESTAMP",
    ).write.format("delta").mode("append").save(INSURANCE_TOMBSTONES.uri(storage))
    put(storage, "raw/cdcload/20240402-090000000.csv", cdc(f"I,{row(1, 2)}"))  # older than the old delete
    put(storage, "raw/cdcload/20240404-090000000.csv", cdc(f"I,{row(2, 1)}", "D,2,,,,,,,,"))
    run(storage, spark)
    assert values(storage) == {}
    tombs = {r["policy_id"]: (r["source_file"], r["source_line"])
             for r in to_arrow(open_table(storage, INSURANCE_TOMBSTONES)).to_pylist()}
    assert tombs == {1: ("raw/cdcload/old.csv", None), 2: ("raw/cdcload/20240404-090000000.csv", 2)}
    closing = [(r["_source_file"], r["_source_line"]) for r in to_arrow(open_table(storage, INSURANCE_HISTORY))
               .to_pylist() if r["policy_id"] == 1 and r["_operation"] == "D"]
    assert closing == [("raw/cdcload/old.csv", None)]  # the old tombstone knows no line


def test_full_load_replaces_the_contents(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/fullload/a.csv", full_load(row(1, 1), row(2, 1), row(3, 1)))
    put(storage, "raw/cdcload/20240101-000000001.csv", cdc(f"I,{row(4, 1)}"))
    run(storage, spark)
    assert set(values(storage)) == {1, 2, 3, 4}
    put(storage, "raw/fullload/b.csv", full_load(row(3, 2), row(5, 2)))
    report = run(storage, spark)
    assert values(storage) == {3: 2, 5: 2}  # the CDC-inserted key 4 is older than the snapshot
    assert [(c.operation, c.inserted, c.updated, c.deleted) for c in report.commits] == [("full load", 1, 1, 3)]


def test_raw_objects_lists_full_loads_then_cdc_in_key_order(storage: LakeStorage) -> None:
    put(storage, "raw/cdcload/b.csv", "x")
    put(storage, "raw/cdcload/a.csv", "y")
    put(storage, "raw/fullload/z.csv", "z")
    put(storage, "raw/cdcload/", b"")  # a zero-byte "directory" key
    objects = raw_files(INSURANCE_DECLARATION, storage)
    assert [(o.key, o.kind, o.size) for o in objects] == [("raw/fullload/z.csv", SourceKind.SNAPSHOT, 1),
                                                          ("raw/cdcload/a.csv", SourceKind.CDC, 1),
                                                          ("raw/cdcload/b.csv", SourceKind.CDC, 1)]
    assert pending_objects(storage, Ledger(storage)) == objects


# --- bad input ---------------------------------------------------------------------------

def test_every_bad_row_class_ends_in_quarantine(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/fullload/a.csv", full_load(
        row(1, 10), "2,2024-02-30,Urban,CA,West,1,Retail,N,Y", "3,2024-01-31,Urban", row(4, 40)))
    body = (
        f"I,{row(10, 1)}\n"                                        # line 1: good
        "I,11,2024-01-31,Urban,CA\n"                               # 2: wrong field count
        "I,,2024-01-31,Urban,CA,West,1,Retail,N,Y\n"              # 3: empty key
        "I,abc,2024-01-31,Urban,CA,West,1,Retail,N,Y\n"           # 4: non-integer key
        "I,12,2024-01-31,Urban,CA,West,2147483648,Retail,N,Y\n"   # 5: out of int32
        "I,13,2024-02-30,Urban,CA,West,1,Retail,N,Y\n"            # 6: impossible date
        "I,14,2024-13-45,Urban,CA,West,1,Retail,N,Y\n"            # 7: impossible date
        "I,15,2024-01-31,Urban,CA,West,1,Retail,maybe,Y\n"        # 8: flag not Y/N
        "X,16,2024-01-31,Urban,CA,West,1,Retail,N,Y\n"            # 9: unknown operation
        "\r\n"                                                      # 10: blank
        'I,17,2024-01-31,"two\nlines, quoted",CA,West,1,Retail,N,Y\r\n'  # 11-12: good
        "I,18,2024-01-31,Urban,CA,West,lots,Retail,N,Y\r\n"       # 13: non-integer value
        "D,1,2024-13-45,,,,lots,,maybe,\n"                         # 14: a delete needs only its key
    )
    put(storage, "raw/cdcload/20240101-000000001.csv", body)
    run(storage, spark)
    assert set(table(storage)) == {10, 17}  # the snapshot with bad rows is held; the changes apply
    approve_held(storage, None, "approve")
    run(storage, spark)  # the held snapshot is older than the changes: they stay

    rows = table(storage)
    assert set(rows) == {4, 10, 17}
    assert rows[17]["location_name"] == "two\nlines, quoted"
    parked = {(q["source_file"], q["line_number"]): q for q in quarantine(storage)}
    expected = {
        ("raw/fullload/a.csv", 3): Reason.BAD_DATE, ("raw/fullload/a.csv", 4): Reason.WRONG_FIELD_COUNT,
        ("raw/cdcload/20240101-000000001.csv", 2): Reason.WRONG_FIELD_COUNT, ("raw/cdcload/20240101-000000001.csv", 3): Reason.EMPTY_KEY,
        ("raw/cdcload/20240101-000000001.csv", 4): Reason.BAD_INTEGER, ("raw/cdcload/20240101-000000001.csv", 5): Reason.BAD_INTEGER,
        ("raw/cdcload/20240101-000000001.csv", 6): Reason.BAD_DATE, ("raw/cdcload/20240101-000000001.csv", 7): Reason.BAD_DATE,
        ("raw/cdcload/20240101-000000001.csv", 8): Reason.BAD_FLAG, ("raw/cdcload/20240101-000000001.csv", 9): Reason.UNKNOWN_OPERATION,
        ("raw/cdcload/20240101-000000001.csv", 13): Reason.BAD_INTEGER,
    }
    assert {k: q["reason"] for k, q in parked.items()} == {k: v.value for k, v in expected.items()}
    assert parked[("raw/cdcload/20240101-000000001.csv", 13)]["raw_text"] == "I,18,2024-01-31,Urban,CA,West,lots,Retail,N,Y"
    assert parked[("raw/cdcload/20240101-000000001.csv", 13)]["detail"] == "insured_value=lots"
    assert parked[("raw/fullload/a.csv", 4)]["raw_text"] == "3,2024-01-31,Urban"
    assert all(q["source_etag"] and q["run_id"].startswith("run-") for q in parked.values())
    entries = ledger(storage)
    assert (entries["raw/cdcload/20240101-000000001.csv"]["rows_in_file"], entries["raw/cdcload/20240101-000000001.csv"]["rows_applied"],
            entries["raw/cdcload/20240101-000000001.csv"]["rows_quarantined"]) == (12, 3, 9)
    # of the snapshot's two valid rows, key 1's is older than the CDC delete of key 1: superseded
    assert (entries["raw/fullload/a.csv"]["rows_in_file"], entries["raw/fullload/a.csv"]["rows_applied"],
            entries["raw/fullload/a.csv"]["rows_superseded"]) == (4, 1, 1)


def test_a_file_that_is_not_csv_is_rejected(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/fullload/a.csv", full_load(row(1, 10)))
    run(storage, spark)
    before = version(storage)
    noise = random.Random(7).randbytes(3000)
    put(storage, "raw/cdcload/20240101-000000001.csv", noise)
    put(storage, "raw/cdcload/20240101-000000002.csv", "This is not a CSV file.\nIt has prose, and no fields.\n\nThe end\n")
    put(storage, "raw/cdcload/20240101-000000003.csv", b'{"policy_id": 1}\n{"policy_id": 2}\n')
    report = run(storage, spark)
    assert report.commits == []
    assert version(storage) == before and values(storage) == {1: 10}
    entries = ledger(storage)
    lines = {"raw/cdcload/20240101-000000001.csv": None, "raw/cdcload/20240101-000000002.csv": 3,
             "raw/cdcload/20240101-000000003.csv": 2}
    for key, count in lines.items():
        entry = entries[key]
        assert (entry["status"], entry["rows_applied"], entry["table_version"]) == (REJECTED, 0, None), key
        assert entry["rows_in_file"] == entry["rows_quarantined"] == (count or entry["rows_in_file"]) > 0, key
    reasons = {q["source_file"]: set() for q in quarantine(storage)}
    for q in quarantine(storage):
        reasons[q["source_file"]].add(q["reason"])
    # binary noise: each record rejected for its own reason (issue 5: only bad records, never the whole file)
    assert "bad_encoding" in reasons.pop("raw/cdcload/20240101-000000001.csv")
    assert reasons == {"raw/cdcload/20240101-000000002.csv": {"wrong_field_count"},
                       "raw/cdcload/20240101-000000003.csv": {"wrong_field_count"}}
    assert pending_objects(storage, Ledger(storage)) == []  # rejected files are done with


def test_full_load_with_a_wrong_header_is_rejected(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/fullload/a.csv", full_load(row(1, 10)))
    run(storage, spark)
    before = version(storage)
    put(storage, "raw/fullload/b.csv", "id,expiry,location,state,region,value,type,quake,flood\n"
        + row(2, 20) + "\n" + row(3, 30) + "\n")
    put(storage, "raw/fullload/c.csv", "policy_id,expiry_date\n" + row(4, 40) + "\n")
    report = run(storage, spark)
    assert report.commits == [] and version(storage) == before and values(storage) == {1: 10}
    entries = ledger(storage)
    # b's first line names no key column: it may be a data row, so it is quarantined with the others
    assert (entries["raw/fullload/b.csv"]["status"], entries["raw/fullload/b.csv"]["rows_quarantined"]) == (REJECTED, 3)
    assert (entries["raw/fullload/c.csv"]["status"], entries["raw/fullload/c.csv"]["rows_quarantined"]) == (REJECTED, 1)
    parked = quarantine(storage)
    assert [(q["source_file"], q["line_number"], q["reason"]) for q in parked] == [
        ("raw/fullload/b.csv", 1, "bad_header"), ("raw/fullload/b.csv", 2, "bad_header"),
        ("raw/fullload/b.csv", 3, "bad_header"), ("raw/fullload/c.csv", 2, "bad_header")]
    assert "header must be policy_id,expiry_date," in parked[0]["detail"]


def test_header_only_full_load_is_held_until_approved(storage: LakeStorage, spark: SparkSession) -> None:
    """Before: a header-only snapshot emptied the table with every check green."""
    put(storage, "raw/fullload/a.csv", full_load(row(1, 10), row(2, 20)))
    run(storage, spark)
    before = version(storage)
    put(storage, "raw/fullload/b.csv", full_load())
    report = run(storage, spark)
    assert report.commits == [] and version(storage) == before and values(storage) == {1: 10, 2: 20}
    entry = ledger(storage)["raw/fullload/b.csv"]
    assert (entry["status"], entry["rows_in_file"], entry["table_version"]) == (HELD, 0, None)
    assert entry["detail"].startswith("empty:")
    assert [e.source_file for e in report.held] == ["raw/fullload/b.csv"]
    assert pending_objects(storage, Ledger(storage)) == []  # a rerun does not publish it
    assert run(storage, spark).commits == []

    assert [o.key for o in approve_held(storage, ["raw/fullload/b.csv"], "approve")] == ["raw/fullload/b.csv"]
    report = run(storage, spark)  # the source table really is empty now
    assert values(storage) == {} and report.version_after == before + 1
    entry = ledger(storage)["raw/fullload/b.csv"]
    assert (entry["status"], entry["table_version"]) == (APPLIED, before + 1)


def test_truncated_full_load_that_shrinks_the_table_is_held(storage: LakeStorage, spark: SparkSession) -> None:
    """Before: an upload cut at one third kept 6 of 25 rows."""
    put_seed(storage, FULL)
    run(storage, spark)
    seed = (DATA / "fullload/full-load.csv").read_bytes()
    put(storage, "raw/fullload/full-load-2.csv", seed[:len(seed) // 3].rsplit(b"\n", 1)[0] + b"\n")
    report = run(storage, spark)
    assert report.commits == [] and len(table(storage)) == 25
    entry = ledger(storage)["raw/fullload/full-load-2.csv"]
    assert entry["status"] == HELD and entry["detail"].startswith("shrinks:") and "from 25 to" in entry["detail"]
    with pytest.raises(UsageError, match="not held"):
        approve_held(storage, ["raw/fullload/full-load.csv"], "approve")


def test_a_quarantined_snapshot_row_keeps_the_current_row(storage: LakeStorage, spark: SparkSession) -> None:
    """Before: one `2023-02-30` row in a snapshot deleted that policy."""
    put(storage, "raw/fullload/a.csv", full_load(row(1, 10), row(2, 20), row(3, 30)))
    run(storage, spark)
    put(storage, "raw/fullload/b.csv", full_load(row(1, 11), row(2, 21, date="2023-02-30"), row(4, 41)))
    report = run(storage, spark)
    assert report.commits == [] and values(storage) == {1: 10, 2: 20, 3: 30}
    entry = ledger(storage)["raw/fullload/b.csv"]
    assert (entry["status"], entry["rows_quarantined"]) == (HELD, 1) and entry["detail"].startswith("rejected_rows:")
    approve_held(storage, None, "approve")
    run(storage, spark)
    assert values(storage) == {1: 11, 2: 20, 4: 41}  # 2 keeps its row; 3 is gone from the source
    put(storage, "raw/cdcload/20240101-000000001.csv", cdc(f"U,{row(2, 22)}"))
    run(storage, spark)
    assert values(storage) == {1: 11, 2: 22, 4: 41}
    assert len(quarantine(storage)) == 1  # quarantined once, though read by two runs


def test_multi_part_full_load_publishes_one_version(storage: LakeStorage, spark: SparkSession) -> None:
    """Before: DMS's LOAD00000001.csv, LOAD00000002.csv, ... each replaced the table: the last part won."""
    put(storage, "raw/fullload/dbo/policy/LOAD00000001.csv", full_load(row(1, 1), row(2, 1)))
    put(storage, "raw/fullload/dbo/policy/LOAD00000002.csv", full_load(row(3, 1), row(4, 1)))
    put(storage, "raw/fullload/dbo/policy/LOAD00000003.csv", full_load(row(5, 1)))
    report = run(storage, spark)
    assert values(storage) == {1: 1, 2: 1, 3: 1, 4: 1, 5: 1}
    assert len(report.commits) == 1 and report.version_after == 0
    assert {e["table_version"] for e in ledger(storage).values()} == {0}
    put(storage, "raw/fullload/dbo/policy/LOAD00000001.csv", full_load(row(1, 2), row(2, 2)))  # a new full load
    put(storage, "raw/fullload/dbo/policy/LOAD00000002.csv", full_load(row(3, 2), row(6, 2)))
    report = run(storage, spark)
    assert len(report.commits) == 1 and values(storage) == {1: 2, 2: 2, 3: 2, 6: 2}

    put(storage, "raw/fullload/dbo/policy/LOAD00000001.csv", full_load(row(1, 3), row(2, 3)))
    put(storage, "raw/fullload/dbo/policy/LOAD00000002.csv", "policy,expiry\n" + row(3, 3) + "\n")  # refused
    report = run(storage, spark)  # a snapshot missing a part is held whole
    assert report.commits == [] and values(storage) == {1: 2, 2: 2, 3: 2, 6: 2}
    entries = ledger(storage)
    assert (entries["raw/fullload/dbo/policy/LOAD00000001.csv"]["status"],
            entries["raw/fullload/dbo/policy/LOAD00000002.csv"]["status"]) == (HELD, REJECTED)


def test_staging_cleanup_never_masks_the_error(
        storage: LakeStorage, spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    put(storage, "raw/cdcload/20240101-000000001.csv", cdc(f"I,{row(1, 1)}"))

    def engine_lost(*args):
        raise RuntimeError("engine lost")

    def s3_down(self, prefix):
        raise StorageUnavailable("S3 down")

    monkeypatch.setattr(committing, "commit", engine_lost)
    monkeypatch.setattr(LakeStorage, "delete_prefix", s3_down)
    with pytest.raises(RuntimeError, match="engine lost") as raised:
        apply_pending(storage, spark, "run-x")
    assert any("could not be removed" in note for note in raised.value.__notes__)


@pytest.mark.parametrize("body", [b"", b"\n\n"])
def test_full_load_without_a_header_is_rejected_and_keeps_the_table(
        storage: LakeStorage, spark: SparkSession, body: bytes) -> None:
    put(storage, "raw/fullload/a.csv", full_load(row(1, 10), row(2, 20)))
    run(storage, spark)
    before = version(storage)
    put(storage, "raw/fullload/b.csv", body)  # e.g. an upload that failed half-way
    report = run(storage, spark)
    assert report.commits == [] and version(storage) == before and values(storage) == {1: 10, 2: 20}
    entry = ledger(storage)["raw/fullload/b.csv"]
    assert (entry["status"], entry["rows_in_file"], entry["table_version"]) == (REJECTED, 0, None)


def test_empty_cdc_file(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/fullload/a.csv", full_load(row(1, 10)))
    run(storage, spark)
    before = version(storage)
    put(storage, "raw/cdcload/20240101-000000001.csv", b"")
    put(storage, "raw/cdcload/20240101-000000002.csv", b"\n\r\n")
    report = run(storage, spark)
    assert report.commits == [] and version(storage) == before and values(storage) == {1: 10}
    entries = ledger(storage)
    for key in ("raw/cdcload/20240101-000000001.csv", "raw/cdcload/20240101-000000002.csv"):
        assert (entries[key]["status"], entries[key]["rows_in_file"], entries[key]["rows_quarantined"]) == (APPLIED, 0, 0)
    assert quarantine(storage) == []
    assert pending_objects(storage, Ledger(storage)) == []


def test_cdc_before_any_full_load_creates_the_table(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/cdcload/20240101-000000001.csv", cdc(f"I,{row(1, 10)}", f"U,{row(2, 20)}", "D,3,,,,,,,,"))
    report = run(storage, spark)
    assert report.version_before is None and report.version_after is not None
    assert values(storage) == {1: 10, 2: 20}
    assert engine_rows(spark, storage)[0][:2] == (1, dt.date(2024, 1, 31))
    schema = open_table(storage, INSURANCE).schema().to_arrow()
    assert [f.name for f in schema][:len(DATA_COLUMN_NAMES)] == DATA_COLUMN_NAMES


def test_only_deletes_before_any_table(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/cdcload/20240101-000000001.csv", cdc("D,1,,,,,,,,"))
    run(storage, spark)
    assert values(storage) == {}
    assert ledger(storage)["raw/cdcload/20240101-000000001.csv"]["status"] == APPLIED


# --- failures ------------------------------------------------------------------------------

def test_unreachable_s3_raises_storage_unavailable(storage: LakeStorage, spark: SparkSession) -> None:
    endpoint = closed_endpoint()
    with pytest.raises(StorageUnavailable, match=re.escape(endpoint)):
        apply_pending(LakeStorage(bucket="x").with_endpoint(endpoint), spark, "run-down")

    put(storage, "raw/fullload/a.csv", full_load(row(1, 10)))
    run(storage, spark)
    put(storage, "raw/cdcload/20240101-000000001.csv", cdc(f"I,{row(2, 20)}"))
    before = (version(storage), len(ledger(storage)), storage.list_objects("curated/"))
    down = storage.with_endpoint(endpoint)  # the same bucket, behind a dead endpoint
    with pytest.raises(StorageUnavailable, match=re.escape(endpoint)) as raised:
        apply_pending(down, spark, "run-down")
    assert f"bucket {storage.bucket}" in str(raised.value)
    assert (version(storage), len(ledger(storage)), storage.list_objects("curated/")) == before
    run(storage, spark)  # once S3 is back the file is still pending and applies
    assert values(storage) == {1: 10, 2: 20}


def _failing_scenario(storage: LakeStorage) -> None:
    put(storage, "raw/fullload/a.csv", full_load(row(1, 10), row(2, 20), row(3, 30)))


def _failing_batches(storage: LakeStorage) -> None:
    put(storage, "raw/cdcload/20240101-000000001.csv", cdc(f"I,{row(4, 40)}", "D,1,,,,,,,,", "U,2,2024-02-30,x,CA,West,1,Retail,N,Y"))
    put(storage, "raw/cdcload/20240101-000000002.csv", cdc(f"U,{row(4, 41)}", "I,5,nope", f"U,{row(3, 31)}"))


def test_failure_half_way_leaves_the_table_and_ledger_untouched(
        storage: LakeStorage, spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    _failing_scenario(storage)
    run(storage, spark)
    version_before, rows_before = version(storage), values(storage)
    _failing_batches(storage)

    def broken(*args, **kwargs):
        raise RuntimeError("engine lost half-way")

    monkeypatch.setattr(committing, "commit", broken)  # every strategy commits through it
    with pytest.raises(RuntimeError, match="half-way"):
        apply_pending(storage, spark, "run-broken")
    assert version(storage) == version_before and values(storage) == rows_before
    assert set(ledger(storage)) == {"raw/fullload/a.csv"}  # nothing recorded for the CDC files
    assert len(quarantine(storage)) == 2  # the quarantine was written before the failure
    assert storage.list_objects(STAGING) == []
    assert [o.key for o in pending_objects(storage, Ledger(storage))] == ["raw/cdcload/20240101-000000001.csv", "raw/cdcload/20240101-000000002.csv"]

    monkeypatch.undo()
    run(storage, spark)
    clean = make_storage(storage.endpoint_url, Path(storage.home), f"c-{uuid.uuid4().hex[:12]}")
    try:
        _failing_scenario(clean)
        run(clean, spark)
        _failing_batches(clean)
        run(clean, spark)
        _compare_with_clean_run(storage, clean)
    finally:
        drop_bucket(clean)


def _compare_with_clean_run(storage: LakeStorage, clean: LakeStorage) -> None:
    assert table(storage) == table(clean) and values(storage) == {2: 20, 3: 31, 4: 41}
    parked = [(q["source_file"], q["line_number"], q["reason"]) for q in quarantine(storage)]
    assert len(parked) == len(set(parked)) == 2  # the rerun added no duplicates
    assert parked == [(q["source_file"], q["line_number"], q["reason"]) for q in quarantine(clean)]
    assert {q["run_id"] for q in quarantine(storage)} == {"run-broken"}
    entries, clean_entries = ledger(storage), ledger(clean)
    counts = ("status", "rows_in_file", "rows_applied", "rows_superseded", "rows_quarantined")
    assert {k: [e[c] for c in counts] for k, e in entries.items()} == {
        k: [e[c] for c in counts] for k, e in clean_entries.items()}
    assert pc.sum(Ledger(storage).entries("insurance")["rows_quarantined"]).as_py() == 2


@pytest.mark.parametrize("crash_in", ["record_tombstones", "record"])
def test_crash_after_the_commit_converges_on_rerun(
        storage: LakeStorage, spark: SparkSession, monkeypatch: pytest.MonkeyPatch, crash_in: str) -> None:
    """The commit landed, then tombstones or the ledger failed: the rerun re-applies the same
    changes (equal sequences re-apply) and ends where a clean run ends."""
    def scenario(target: LakeStorage) -> None:
        put(target, "raw/fullload/a.csv", full_load(row(1, 10), row(2, 20), row(3, 30)))
        put(target, "raw/cdcload/20240101-000000001.csv", cdc(f"U,{row(1, 11)}", "D,2,,,,,,,,", "I,9,bad"))

    scenario(storage)

    def crash(*args, **kwargs):
        raise RuntimeError("killed after the commit")

    monkeypatch.setattr(bookkeeping if crash_in == "record_tombstones" else Ledger, crash_in, crash)
    with pytest.raises(RuntimeError, match="after the commit"):
        apply_pending(storage, spark, "run-crash")
    assert version(storage) == 0 and values(storage) == {1: 11, 3: 30}
    monkeypatch.undo()
    run(storage, spark)
    put(storage, "raw/cdcload/20231231-000000000.csv", cdc(f"I,{row(2, 5)}"))  # older than the delete
    run(storage, spark)

    clean = make_storage(storage.endpoint_url, Path(storage.home), f"c-{uuid.uuid4().hex[:12]}")
    try:
        scenario(clean)
        run(clean, spark)
        put(clean, "raw/cdcload/20231231-000000000.csv", cdc(f"I,{row(2, 5)}"))
        run(clean, spark)
        assert table(storage) == table(clean) and values(storage) == {1: 11, 3: 30}
        counts = ("status", "rows_in_file", "rows_applied", "rows_superseded", "rows_quarantined", "source_sequence")
        assert {k: [e[c] for c in counts] for k, e in ledger(storage).items()} == {
            k: [e[c] for c in counts] for k, e in ledger(clean).items()}
        assert len(quarantine(storage)) == len(quarantine(clean)) == 1
    finally:
        drop_bucket(clean)


def test_a_cdc_file_whose_first_record_exceeds_the_shape_sample(storage: LakeStorage, spark: SparkSession) -> None:
    """The file's shape came from a 64 KiB sample: a ~100 KiB first record left only a cut
    record in it, the file was read as no declared shape and every row refused as
    `wrong_field_count`. Its shape now comes from complete records: the long row applies,
    the bad one is quarantined for its own reason, the others apply."""
    put(storage, FULL, full_load(row(1), row(2), row(3)))
    run(storage, spark)
    long_name = "Urban " + "x" * 100_000
    put(storage, CDC_1, cdc(f"U,{row(1, 111)}".replace("Urban", long_name),
                            f"U,{row(2, 222)}",
                            f"U,{row(3, 333, date='2024-13-45')}",
                            f"I,{row(4, 444)}"))
    run(storage, spark)
    rows = table(storage)
    assert rows[1]["location_name"] == long_name and rows[1]["insured_value"] == 111
    assert values(storage) == {1: 111, 2: 222, 3: 1000, 4: 444}
    entry = ledger(storage)[CDC_1]
    assert (entry["status"], entry["rows_applied"], entry["rows_quarantined"]) == (APPLIED, 3, 1)
    [parked] = [q for q in quarantine(storage) if q["source_file"] == CDC_1]
    assert (parked["line_number"], parked["reason"]) == (3, Reason.BAD_DATE.value)
