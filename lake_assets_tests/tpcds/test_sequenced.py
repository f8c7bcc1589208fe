"""tpcds.web_sales on sequenced changes: day objects and corrections under one per-key rule.

Each test is a reproduction from issue 12: a backfill undid corrections; `fix.dat` made every
later DMS-named correction `late_file`; a key in two day objects was claimed by both; one odd
folder made every run end in a traceback.
"""

import datetime as dt

import duckdb
import pyarrow as pa
from pyspark.sql import SparkSession

from lake_assets.core.raw_status import file_statuses
from lake_assets.core.ledger import Ledger
from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.checks import evaluate_rows_accounted, evaluate_rows_match_raw
from lake_assets.tpcds.corrections import BY_ARRIVAL, apply_corrections
from lake_assets.tpcds.layout import fact_layout, fact_objects
from lake_assets.tpcds.load import iceberg_schema, load_fact_days
from lake_assets.tpcds.pending import pending_work
from lake_assets.tpcds.raw_duckdb import create_raw_views
from lake_assets.tpcds.schema import COLUMNS, NAMESPACE, RAW, TpcdsTable, date_sk, ledger_name
from lake_assets_tests.helpers.tpcds import fact_key, fact_query, generated, land_facts, sold_dates
from lake_assets_tests.helpers.tpcds_model import ORDER, key_of
from lake_assets_tests.tpcds.test_load import fact_rows, quarantine

WEB_SALES = ledger_name(TpcdsTable.WEB_SALES)
QUANTITY = 18


def as_text(row: tuple) -> list[str]:
    return ["" if v is None else str(v) for v in row]


def rows_by_key(catalog: LakeCatalog) -> dict[tuple[str, str], list[str]]:
    return {key_of(as_text(r)): as_text(r) for r in fact_rows(catalog)}


def put_lines(storage: LakeStorage, key: str, lines: list[str]) -> None:
    storage.put_bytes(key, ("\n".join(lines) + "\n").encode())


def day_lines(storage: LakeStorage, day: dt.date) -> list[str]:
    return storage.get_bytes(fact_key(day))[0].decode().splitlines()


def entries(storage: LakeStorage) -> list[dict]:
    return Ledger(storage).entries(WEB_SALES).to_pylist()


def duckdb_over_raw(storage: LakeStorage) -> dict[tuple[str, str], list[str]]:
    """The raw zone read by DuckDB: every day object, then every correction applied in name order."""
    con = duckdb.connect()
    create_raw_views(con, storage, corrections=True)
    columns = ", ".join(n for n, _ in COLUMNS[TpcdsTable.WEB_SALES])
    return {key_of(as_text(r)): as_text(r) for r in con.sql(f"SELECT {columns} FROM lake.tpcds.web_sales").fetchall()}


def test_a_backfill_keeps_newer_corrections_and_a_redelivered_day_wins(
    storage: LakeStorage, catalog: LakeCatalog, spark: SparkSession
) -> None:
    oracle = generated(0.01)
    days = sold_dates(oracle)[:3]
    land_facts(storage, oracle, days)
    load_fact_days(storage, spark, days, "run-load")
    first = {e["source_file"]: e["source_sequence"] for e in entries(storage)}
    middle = day_lines(storage, days[1])
    updated, deleted = middle[0].split("|"), middle[1].split("|")
    updated[QUANTITY] = "77"
    inserted = list(middle[2].split("|"))
    inserted[ORDER] = "99000001"
    blank = [""] * 34
    blank[3], blank[ORDER] = deleted[3], deleted[ORDER]
    put_lines(storage, f"{RAW.corrections}20240101-000000000.dat",
              ["U|" + "|".join(updated), "D|" + "|".join(blank), "I|" + "|".join(inserted)])
    apply_corrections(storage, spark, "run-cdc")
    corrected = rows_by_key(catalog)
    assert corrected[key_of(updated)][QUANTITY] == "77" and key_of(deleted) not in corrected
    assert key_of(inserted) in corrected

    # `lake backfill`: the same objects again. Before, the corrections were gone.
    load_fact_days(storage, spark, days, "run-backfill")
    assert rows_by_key(catalog) == corrected == duckdb_over_raw(storage)
    backfill = [e for e in entries(storage) if e["run_id"] == "run-backfill"]
    assert {e["source_file"]: e["source_sequence"] for e in backfill} == first  # sequences kept
    changed = [e for e in backfill if e["source_file"] == fact_key(days[1])][0]
    assert (changed["rows_applied"], changed["rows_superseded"]) == (len(middle) - 2, 2)  # U and D are newer
    engine = SparkEngine()
    assert evaluate_rows_match_raw(storage, engine).passed
    assert evaluate_rows_accounted(storage, engine).passed

    # a re-delivered day (new content) is newer than the corrections: its day is exactly its object
    put_lines(storage, fact_key(days[1]), middle[:-1])
    load_fact_days(storage, spark, [days[1]], "run-redelivered")
    day = {k: r for k, r in rows_by_key(catalog).items() if r[0] == str(date_sk(days[1]))}
    assert day == {key_of(line.split("|")): line.split("|") for line in middle[:-1]}
    assert entries(storage)[-1]["source_sequence"] > max(first.values())
    assert evaluate_rows_match_raw(storage, engine).passed and evaluate_rows_accounted(storage, engine).passed

    # backfilling again changes nothing: the re-delivered day keeps its sequence, its dropped line stays deleted
    load_fact_days(storage, spark, days, "run-backfill-2")
    assert {k: r for k, r in rows_by_key(catalog).items() if r[0] == str(date_sk(days[1]))} == day


def test_fix_dat_first_never_poisons_dms_named_files(storage: LakeStorage, catalog: LakeCatalog,
                                                     spark: SparkSession) -> None:
    oracle = generated(0.01)
    days = sold_dates(oracle)[:2]
    land_facts(storage, oracle, days)
    load_fact_days(storage, spark, days, "run-load")
    lines = day_lines(storage, days[0])
    a, b, c = (line.split("|") for line in lines[:3])

    def upsert(fields: list[str], quantity: str) -> str:
        return "U|" + "|".join(fields[:QUANTITY] + [quantity] + fields[QUANTITY + 1:])

    put_lines(storage, f"{RAW.corrections}fix.dat", [upsert(a, "1")])
    apply_corrections(storage, spark, "run-fix")
    put_lines(storage, f"{RAW.corrections}20240101-000000000.dat", [upsert(a, "2"), upsert(b, "3")])
    apply_corrections(storage, spark, "run-dms")
    # an older DMS file: superseded for the keys newer changes touched, applied to the others
    put_lines(storage, f"{RAW.corrections}20231231-000000000.dat", [upsert(a, "4"), upsert(c, "5")])
    apply_corrections(storage, spark, "run-older")

    table = rows_by_key(catalog)
    assert [table[key_of(f)][QUANTITY] for f in (a, b, c)] == ["2", "3", "5"]
    assert not _quarantine_exists(storage) or quarantine(storage) == []  # nothing `late_file`
    latest = {e["source_file"].rsplit("/", 1)[1]: e for e in entries(storage)}
    assert latest["fix.dat"]["detail"] == BY_ARRIVAL and latest["fix.dat"]["status"] == "applied"
    assert (latest["20240101-000000000.dat"]["status"], latest["20240101-000000000.dat"]["rows_applied"]) == ("applied", 2)
    older = latest["20231231-000000000.dat"]
    assert (older["status"], older["rows_applied"], older["rows_superseded"]) == ("applied", 1, 1)
    assert latest["20240101-000000000.dat"]["detail"] is None
    assert evaluate_rows_accounted(storage, SparkEngine()).passed


def _quarantine_exists(storage: LakeStorage) -> bool:
    from lake_assets.core.formats.delta import open_table
    from lake_assets.tpcds.schema import QUARANTINES

    return open_table(storage, QUARANTINES[TpcdsTable.WEB_SALES]) is not None


def test_a_key_in_two_days_is_claimed_by_one(storage: LakeStorage, catalog: LakeCatalog, spark: SparkSession) -> None:
    oracle = generated(0.01)
    days = sold_dates(oracle)[:3]
    land_facts(storage, oracle, days)
    first, second = day_lines(storage, days[0]), day_lines(storage, days[1])
    moved = first[0].split("|")
    moved[0] = str(date_sk(days[1]))
    put_lines(storage, fact_key(days[1]), second + ["|".join(moved)])

    load_fact_days(storage, spark, days[:2], "run-both")  # one run: the later day is the newer snapshot
    table = rows_by_key(catalog)
    assert table[key_of(moved)] == moved
    latest = {e["source_file"]: e for e in entries(storage)}
    assert (latest[fact_key(days[0])]["rows_applied"], latest[fact_key(days[0])]["rows_superseded"]) == \
        (len(first) - 1, 1)
    assert latest[fact_key(days[1])]["rows_applied"] == len(second) + 1
    assert len(table) == sum(e["rows_applied"] for e in latest.values())  # 16 claimed, 16 in the table
    engine = SparkEngine()
    assert evaluate_rows_match_raw(storage, engine).passed and evaluate_rows_accounted(storage, engine).passed

    # across runs: the third day takes the key too; the second day's entry no longer holds it
    third = day_lines(storage, days[2])
    moved[0] = str(date_sk(days[2]))
    put_lines(storage, fact_key(days[2]), third + ["|".join(moved)])
    load_fact_days(storage, spark, [days[2]], "run-third")
    assert rows_by_key(catalog)[key_of(moved)] == moved
    assert len(rows_by_key(catalog)) == len(table) + len(third)  # the key moved, not copied
    assert evaluate_rows_match_raw(storage, engine).passed and evaluate_rows_accounted(storage, engine).passed


def test_odd_fact_objects_are_status_lines_and_block_nothing(storage: LakeStorage, catalog: LakeCatalog,
                                                            spark: SparkSession) -> None:
    oracle = generated(0.01)
    days = sold_dates(oracle)[:3]
    land_facts(storage, oracle, days)
    second_part = f"{RAW.fact_folder(days[0])}part-00001.dat"
    storage.put_bytes(second_part, storage.get_bytes(fact_key(days[0]))[0])
    bad_folder = f"{RAW.facts}ws_sold_date_sk=1998-01-03/part-00000.dat"
    storage.put_bytes(bad_folder, storage.get_bytes(fact_key(days[1]))[0])
    outside = f"{RAW.facts}ws_sold_date_sk={date_sk(dt.date(2003, 3, 2))}/part-00000.dat"  # after the calendar
    storage.put_bytes(outside, storage.get_bytes(fact_key(days[1]))[0])
    old_layout = f"{RAW.facts}ws_sold_date={days[1]}/part-00000.dat"  # the folders before they named the key
    storage.put_bytes(old_layout, storage.get_bytes(fact_key(days[1]))[0])
    loose = f"{RAW.facts}notes.dat"
    storage.put_bytes(loose, b"hello\n")

    layout = fact_layout(storage)
    assert sorted(layout.refused) == sorted([fact_key(days[0]), second_part, bad_folder, outside, old_layout, loose])
    assert f"move it to {fact_key(days[1])} " in layout.refused[old_layout]
    assert "2003-03-02" in layout.refused[outside] and "outside the calendar" in layout.refused[outside]
    assert f"{RAW.fact_folder(dt.date(1998, 1, 2))}part-00000.dat" in layout.refused[bad_folder]
    assert set(layout.objects) == set(days[1:])
    work = pending_work(storage)  # before, `fact_objects` raised here
    assert work.days == tuple(days[1:])

    load_fact_days(storage, spark, list(fact_objects(storage)), "run-1")
    loaded = {r[0] for r in fact_rows(catalog)}
    assert loaded == {date_sk(d) for d in days[1:]}
    rows = {s.file: s for s in file_statuses(storage, Ledger(storage).latest_by_table())}
    for key in layout.refused:
        assert rows[key].status == "ignored" and rows[key].detail, rows[key]
    assert "holds 2 objects" in (rows[second_part].detail or "") and "the sold date's key" in (rows[bad_folder].detail or "")
    assert rows[fact_key(days[1])].status == "applied"

    # once the layout is fixed the day loads as usual
    storage.get_client().delete_object(Bucket=storage.bucket, Key=second_part)
    assert pending_work(storage).days == (days[0],)
    load_fact_days(storage, spark, [days[0]], "run-2")
    assert {r[0] for r in fact_rows(catalog)} == {date_sk(d) for d in days}


def test_a_table_without_sequences_gets_the_column_and_its_rows_count_as_oldest(
    storage: LakeStorage, catalog: LakeCatalog, spark: SparkSession
) -> None:
    oracle = generated(0.01)
    days = sold_dates(oracle)[:2]
    land_facts(storage, oracle, days)
    client = storage.catalog().pyiceberg()
    client.create_namespace_if_not_exists(NAMESPACE)
    old_schema = iceberg_schema(TpcdsTable.WEB_SALES).select(*(n for n, _ in COLUMNS[TpcdsTable.WEB_SALES]))
    old = client.create_table((NAMESPACE, TpcdsTable.WEB_SALES), schema=old_schema)
    rows = pa.concat_tables([oracle.sql(fact_query(day)).to_arrow_table() for day in days])
    old.append(rows.cast(old_schema.as_arrow()))

    load_fact_days(storage, spark, [days[0]], "run-1")  # evolves the schema, re-loads one day over old rows

    table = client.load_table((NAMESPACE, TpcdsTable.WEB_SALES))
    assert table.schema().fields[-1].name == "_sequence"
    sequences = table.scan(selected_fields=("ws_sold_date_sk", "_sequence")).to_arrow().to_pylist()
    assert {r["_sequence"] is None for r in sequences if r["ws_sold_date_sk"] == date_sk(days[1])} == {True}
    assert None not in {r["_sequence"] for r in sequences if r["ws_sold_date_sk"] == date_sk(days[0])}
    assert len(sequences) == rows.num_rows


def test_reloading_objects_in_runs_of_other_shapes_supersedes_nothing(storage: LakeStorage, catalog: LakeCatalog,
                                                                       spark: SparkSession) -> None:
    """What the sensor does while `lake tpcds generate` uploads: a run over the first days, one over
    every day, one over most of them again. The same objects re-applied keep every row (the engine
    numbers lines per read, so a re-read may number them differently: only the object part of
    two sequences decides then), and the checks hold."""
    oracle = generated(0.01)
    days = [d for d in sold_dates(oracle) if d is not None]
    land_facts(storage, oracle, days)
    load_fact_days(storage, spark, days[:85], "run-first")
    load_fact_days(storage, spark, days, "run-all")
    again = load_fact_days(storage, spark, days[len(days) - 413:], "run-most")
    assert sum(e.rows_superseded for e in again.files) == 0
    assert sum(e.rows_applied for e in again.files) == sum(e.rows_in_file for e in again.files)
    assert evaluate_rows_match_raw(storage, SparkEngine()).passed
    assert evaluate_rows_accounted(storage, SparkEngine()).passed
