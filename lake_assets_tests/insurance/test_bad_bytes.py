"""Bad bytes and stray objects in the raw zone, end to end through apply_pending (issue 5, point 4)."""

import gzip

from pyspark.sql import SparkSession

from lake_assets.core.formats.delta import open_table, to_arrow
from lake_assets.core.raw_zone import is_data_file
from lake_assets_tests.helpers.insurance_tables import INSURANCE
from lake_assets.declared.checks import record_count, rows_conserved
from lake_assets.core.registry import declaration
from lake_assets_tests.helpers.insurance_tables import Reason
from lake_assets_tests.helpers.insurance import apply_pending
from lake_assets.core.apply.plan import raw_files
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.insurance.test_pipeline import (
    assert_conserved,
    cdc,
    full_load,
    ledger,
    put,
    quarantine,
    row,
    table,
    values,
)

DECLARED = declaration("insurance")

CDC_FILE = "raw/cdcload/20240401-090000000.csv"


def test_non_csv_keys_are_ignored(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/fullload/full.csv", full_load(row(1), row(2)))
    put(storage, "raw/fullload/_SUCCESS", b"")
    put(storage, "raw/cdcload/.DS_Store", b"\x00\x00\x00\x01Bud1\x00\x00")
    put(storage, "raw/cdcload/20240401-090000000.csv.gz", b"\x1f\x8b\x08\x00garbage")
    put(storage, "raw/cdcload/README", "I,99,2024-01-31,Urban,CA,West,1,Retail,N,N\n")
    put(storage, "raw/cdcload/20240402-090000000.CSV", cdc(f"U,{row(2, 7)}"))
    report = apply_pending(storage, spark, "run-1")
    assert sorted(f.source_file for f in report.files) == ["raw/cdcload/20240402-090000000.CSV",
                                                           "raw/fullload/full.csv"]
    assert values(storage) == {1: 1000, 2: 7}
    assert quarantine(storage) == []
    assert set(ledger(storage)) == {"raw/cdcload/20240402-090000000.CSV", "raw/fullload/full.csv"}
    assert [o.key for o in raw_files(DECLARED, storage)] == ["raw/fullload/full.csv", "raw/cdcload/20240402-090000000.CSV"]


def test_is_data_file() -> None:
    assert is_data_file("raw/cdcload/a.csv") and is_data_file("raw/cdcload/sub/A.CSV")
    for key in ("raw/cdcload/_SUCCESS", "raw/cdcload/.DS_Store", "raw/x.csv.gz", "raw/x.csv.tmp", "raw/cdcload/"):
        assert not is_data_file(key)


def test_bad_bytes_quarantine_only_their_rows(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/fullload/full.csv", full_load(row(1), row(2), row(3)))
    lines = [
        f"U,{row(1, 11)}".encode(),
        f'U,2,"unterminated,{row(2, 22)[2:]}'.encode(),          # line 2: the quote never closes
        f"U,{row(3, 33)}".encode(),                                # line 3: applies after it
        b"I,4,2024-01-31,Z\xfcrich,CA,West,44,Retail,N,N",         # line 4: latin-1
        b"I,5,2024-01-31,\"Two\nLines\",CA,West,55,Retail,N,N",  # lines 5-6: one record
        f"I,-6,{row(6)[2:]}".encode(),                             # line 7: negative key
        f"I,{row(7, 77)}".encode(),                                # line 8
    ]
    put(storage, CDC_FILE, b"\n".join(lines) + b"\n")
    apply_pending(storage, spark, "run-1")
    assert values(storage) == {1: 11, 2: 1000, 3: 33, 5: 55, 7: 77}
    parked = {q["line_number"]: q["reason"] for q in quarantine(storage)}
    assert parked == {2: Reason.UNTERMINATED_QUOTE.value, 4: Reason.BAD_ENCODING.value, 7: Reason.NEGATIVE_KEY.value}
    audit = {r["policy_id"]: r["_source_line"] for r in to_arrow(open_table(storage, INSURANCE)).to_pylist()}
    assert audit[3] == 3 and audit[5] == 5 and audit[7] == 8
    assert table(storage)[5]["location_name"] == "Two\nLines"
    entry = ledger(storage)[CDC_FILE]
    assert (entry["rows_in_file"], entry["rows_applied"], entry["rows_quarantined"]) == (7, 4, 3)
    assert_conserved(storage)
    assert rows_conserved(DECLARED, "run-1", storage, spark).passed  # the run's blocking check stays green


def test_the_conservation_check_still_recounts_files_with_sound_quoting(storage: LakeStorage,
                                                                       spark: SparkSession) -> None:
    put(storage, CDC_FILE, f'I,{row(1)}\nI,2,2024-01-31,"Two\nLines",CA,West,1,Retail,N,N\nI,x\n')
    apply_pending(storage, spark, "run-1")
    assert record_count(storage.get_bytes(CDC_FILE)[0], False, [len(c.names) for c in DECLARED.contracts]) == 3
    assert rows_conserved(DECLARED, "run-1", storage, spark).passed


def test_a_binary_file_is_quarantined_not_a_traceback(storage: LakeStorage, spark: SparkSession, capfd) -> None:
    put(storage, CDC_FILE, bytes(range(256)) * 8)
    report = apply_pending(storage, spark, "run-1")
    assert report.files[0].rows_applied == 0 and report.files[0].rows_quarantined > 0
    assert {q["reason"] for q in quarantine(storage)} <= {Reason.BAD_ENCODING.value, Reason.WRONG_FIELD_COUNT.value,
                                                         Reason.UNTERMINATED_QUOTE.value}
    assert "UnicodeDecodeError" not in capfd.readouterr().err
    assert_conserved(storage)
    assert rows_conserved(DECLARED, "run-1", storage, spark).passed


def test_a_compressed_file_is_refused_whole_and_blocks_nothing(storage: LakeStorage, spark: SparkSession) -> None:
    """A CDC file gzip-compressed under a `.csv` name (DMS's `CompressionType: GZIP` writes
    `.csv.gz`, which is ignored with a hint; renamed, it lands here) is refused whole, naming gzip,
    its records quarantined under that one reason (not read as text, one by one); the next file
    applies."""
    put(storage, CDC_FILE, gzip.compress(cdc(f"I,{row(1)}").encode()))
    put(storage, "raw/cdcload/20240401-100000000.csv", cdc(f"I,{row(2)}"))
    report = apply_pending(storage, spark, "run-1")
    compressed, plain = report.files
    assert compressed.status == "rejected" and compressed.rows_applied == 0
    assert compressed.detail.startswith("bad_encoding: gzip-compressed data, not text: refused whole"), compressed.detail
    assert (plain.status, plain.rows_applied) == ("applied", 1) and list(table(storage)) == [2]
    quarantined = quarantine(storage)  # its records (whatever the bytes' line ends make of it), under one reason
    assert len(quarantined) == compressed.rows_quarantined == compressed.rows_in_file
    assert {(q["reason"], q["detail"]) for q in quarantined} == {("bad_encoding", compressed.detail.split(": ", 1)[1])}
    assert rows_conserved(DECLARED, "run-1", storage, spark).passed
