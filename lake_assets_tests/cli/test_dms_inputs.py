"""The files an AWS DMS task writes to S3, as its user guide shows them, put and run through
`lake` from a fresh lake each (issue 28): every raw row of every file accounted for in
`lake status` (applied + superseded + quarantined = rows delivered), the table read back by
`lake query`."""

from pathlib import Path

import pytest

from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.conftest import make_storage
from lake_assets_tests.helpers.dms import HEADER, accounted, commit_time, fields, load_part, put, query, run, values

FULL, CDC = "fullload", "cdcload"


def test_a_full_load_of_more_than_nine_parts_is_one_snapshot_in_hex_order(lake_env: LakeStorage,
                                                                          tmp_path: Path) -> None:
    """Before: LOAD0000000A.csv and up were snapshots of their own (the hex counter read as
    decimal digits), and the table kept the rows of the last one."""
    delivered = {}
    for counter in range(1, 0x12):  # LOAD00000001.csv ... LOAD00000009.csv, LOAD0000000A.csv ... LOAD00000011.csv
        records = [fields(counter, counter)]
        if counter in (0x9, 0xA):  # one key in two parts: the later part, by its hex counter, wins
            records.append(fields(100, counter))
        if counter in (0xF, 0x10):
            records.append(fields(200, counter))
        name = f"dbo/policy/{load_part(counter)}"
        delivered[f"raw/fullload/{name}"] = put(tmp_path, FULL, name, *records)
    out = run()
    assert out.count("rows 0 -> 19") == 1, out  # one version: one commit of every part
    assert values() == {**{n: n for n in range(1, 0x12)}, 100: 0xA, 200: 0x10}
    rows = accounted(delivered)
    assert {r["status"] for r in rows.values()} == {"applied"} and {r["version"] for r in rows.values()} == {0}
    assert sum(r["superseded"] for r in rows.values()) == 2


def test_a_headerless_full_load_is_read_and_keeps_its_first_row(lake_env: LakeStorage, tmp_path: Path) -> None:
    """Before: DMS's default (AddColumnName=false) was refused as `bad_header`, and its first
    row, taken for the header, was counted nowhere (5 rows delivered, 4 accounted). The next
    load, a new snapshot of the same five policies, has IncludeOpForFullLoad's `I` and
    TimestampColumnName's column first."""
    delivered = {}
    layouts = {"plain": "", "IncludeOpForFullLoad and TimestampColumnName": "I,{ts},"}
    for step, (setting, prefix) in enumerate(layouts.items()):
        name = f"{step}/{load_part(1)}"
        records = [prefix.format(ts=commit_time(key)) + fields(key, 10 * key + step) for key in range(1, 6)]
        delivered[f"raw/fullload/{name}"] = put(tmp_path, FULL, name, *records)
        run()
        assert values() == {key: 10 * key + step for key in range(1, 6)}, setting
    rows = accounted(delivered)
    assert [r["applied"] for r in rows.values()] == [5, 5]


def test_the_timestamp_column_is_read_where_dms_writes_it_or_the_file_is_refused_whole(
        lake_env: LakeStorage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a CDC file with DMS's TimestampColumnName column, one field more than contract
    v1's, was read as contract v2 (which adds one column): its deletes applied, its inserts and
    updates quarantined (the timestamp is no boolean), the file `applied`, exit 0."""
    delivered = {"raw/fullload/full.csv": put(tmp_path, FULL, "full.csv", *[fields(k, k) for k in range(1, 5)],
                                              header=HEADER)}
    run()
    # without a header: the field before the source's columns (after the operation) holds it
    name = "20240401-090000000.csv"
    delivered[f"raw/cdcload/{name}"] = put(tmp_path, CDC, name, f"I,{commit_time(1)},{fields(5, 50)}",
                                           f"U,{commit_time(2)},{fields(1, 11)}", f"D,{commit_time(3)},{fields(2, 2)}")
    # where DMS does not write it (after the source's columns), a reading as contract v2 fits the
    # field count: refused whole, the delete in it not applied either
    name = "20240401-100000000.csv"
    delivered[f"raw/cdcload/{name}"] = put(tmp_path, CDC, name, f"U,{fields(3, 33)},{commit_time(4)}",
                                           f"D,{fields(4, 4)},{commit_time(5)}")
    out = run(expected=3)
    assert "TimestampColumnName" in out
    assert values() == {1: 11, 3: 3, 4: 4, 5: 50}
    # with a header (AddColumnName): read by the header, wherever it names the column
    monkeypatch.setenv("LAKE_DMS_TIMESTAMP_COLUMN", "commit_ts")
    name = "20240401-110000000.csv"
    delivered[f"raw/cdcload/{name}"] = put(tmp_path, CDC, name, f"U,{fields(3, 34)},{commit_time(6)}",
                                           f"D,{fields(4, 4)},{commit_time(7)}", header=f"Op,{HEADER},commit_ts")
    run()
    assert values() == {1: 11, 3: 34, 5: 50}
    rows = accounted(delivered)
    refused = rows["raw/cdcload/20240401-100000000.csv"]
    assert (refused["status"], refused["applied"], refused["quarantined"]) == ("rejected", 0, 2)
    assert refused["detail"].startswith("dms_layout:") and "TimestampColumnName" in refused["detail"]
    assert rows["raw/cdcload/20240401-090000000.csv"]["applied"] == 3
    assert rows["raw/cdcload/20240401-110000000.csv"]["applied"] == 2


def test_ties_between_files_of_one_dms_time_do_not_depend_on_runs(
        lake_env: LakeStorage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: two CDC files of the same DMS time (a re-upload `... copy.csv`, one name in two
    folders) had equal sequences, and the one applied in the later run won: the same raw zone
    gave a different table as the files landed in one run or two, in either order."""
    files = {"20240401-090000000.csv": [f"U,{fields(1, 10)}", f"I,{fields(2, 20)}"],
             "20240401-090000000 copy.csv": [f"U,{fields(1, 11)}", f"D,{fields(2, 2)}"],
             "a/20240401-100000000.csv": [f"I,{fields(3, 30)}"],
             "b/20240401-100000000.csv": [f"I,{fields(3, 31)}"]}
    originals, uploads = list(files)[0::2], list(files)[1::2]
    orders = {"one run": [list(files)], "originals first": [originals, uploads],
              "re-uploads first": [uploads, originals]}
    outcomes = {}
    for order, runs in orders.items():
        bucket = make_storage(lake_env.endpoint_url, Path(lake_env.home), f"{lake_env.bucket}-{len(outcomes)}")
        monkeypatch.setenv("LAKE_S3_BUCKET", bucket.bucket)  # a fresh lake
        try:
            for names in runs:
                for name in names:
                    put(tmp_path, CDC, name, *files[name])
                run()
            outcomes[order] = values()
            accounted({f"raw/cdcload/{name}": len(records) for name, records in files.items()})
        finally:
            bucket.delete_prefix("")
            bucket.get_client().delete_bucket(Bucket=bucket.bucket)
    assert outcomes["one run"] == outcomes["originals first"] == outcomes["re-uploads first"], outcomes


def test_a_ten_digit_dms_name_in_a_date_folder_orders_by_its_time(lake_env: LakeStorage, tmp_path: Path) -> None:
    """Before: `20240401-0950000000.csv` (HHMMSS and four digits of a second, as DMS's guide
    names CDC files) was not read as a time: stamped at its folder's midnight, it sorted before
    the day's earlier file and lost to it."""
    later, earlier = "2024/04/01/20240401-0950000000.csv", "2024/04/01/20240401-093000000.csv"
    delivered = {f"raw/cdcload/{later}": put(tmp_path, CDC, later, f"I,{fields(1, 950)}", f"I,{fields(2, 950)}")}
    run()
    delivered[f"raw/cdcload/{earlier}"] = put(tmp_path, CDC, earlier, f"U,{fields(1, 930)}")  # late, and older
    run()
    assert values() == {1: 950, 2: 950}
    rows = accounted(delivered)
    assert (rows[f"raw/cdcload/{earlier}"]["applied"], rows[f"raw/cdcload/{earlier}"]["superseded"]) == (0, 1)


def test_other_dms_settings_the_lake_reads(lake_env: LakeStorage, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """AddColumnName on CDC files (a header with `Op`), CdcInsertsOnly (records without their
    operation), CsvNullValue, and PreserveTransactions' files (refused whole: every table in one)."""
    monkeypatch.setenv("LAKE_DMS_CSV_NULL_VALUE", "NULL")
    delivered = {"raw/fullload/dbo/policy/LOAD00000001.csv": put(
        tmp_path, FULL, "dbo/policy/LOAD00000001.csv", *[fields(k, k) for k in range(1, 4)])}
    run()
    files = {"20240402-090000000.csv": ([f"U,{fields(1, 11)}", f"D,{fields(2, 2)}"], f"Op,{HEADER}"),
             "20240402-100000000.csv": ([fields(4, 40), "5,NULL,NULL,CA,West,NULL,Retail,N,N"], None),
             "CDC_TXN-20240402100000000.csv": ([f"I,policy,dbo,{fields(6, 60)}"], None)}
    for name, (records, header) in files.items():
        delivered[f"raw/cdcload/{name}"] = put(tmp_path, CDC, name, *records, header=header)
    out = run(expected=3)
    assert "PreserveTransactions" in out
    assert values() == {1: 11, 3: 3, 4: 40, 5: None}
    assert query("SELECT expiry_date, location_name FROM insurance WHERE policy_id = 5") == [
        {"expiry_date": None, "location_name": None}]
    rows = accounted(delivered)
    assert rows["raw/cdcload/CDC_TXN-20240402100000000.csv"]["detail"].startswith("dms_layout:")
