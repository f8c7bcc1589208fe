"""Corrections (CDC) applied to tpcds.web_sales, compared with a pure-Python model."""

import random

import pytest
from pyspark.sql import SparkSession

from lake_assets.core.ledger import Ledger
from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds import apply
from lake_assets.tpcds.corrections import apply_corrections, pending_corrections
from lake_assets.tpcds.load import load_fact_days
from lake_assets.core.tables import TPCDS_WEB_SALES
from lake_assets.tpcds.schema import PARTITION_DAYS, RAW, TpcdsTable, date_sk, ledger_name
from lake_assets_tests.helpers.tpcds import generated, land_facts, sold_dates
from lake_assets_tests.tpcds.test_load import fact_rows, quarantine

ITEM, ORDER = 3, 17  # positions of the key columns in a web_sales line


def key_of(fields: list[str]) -> tuple[str, str]:
    return fields[ITEM], fields[ORDER]


def apply_model(model: dict[tuple[str, str], list[str]], lines: list[str]) -> None:
    """The CDC semantics in plain Python: the last line per key wins; D deletes, I/U upsert."""
    for line in lines:
        op, *fields = line.split("|")
        if op == "D":
            model.pop(key_of(fields), None)
        else:
            model[key_of(fields)] = fields


def as_text(row: tuple) -> list[str]:
    return ["" if v is None else str(v) for v in row]


def correction_batch(rng: random.Random, model: dict, next_order: list[int]) -> list[str]:
    lines = []
    keys = sorted(model)
    for fields in (model[k] for k in rng.sample(keys, 8)):  # changed quantities and prices
        changed = list(fields)
        changed[18] = str(rng.randint(1, 100))
        changed[21] = f"{rng.randint(1, 30000) / 100:.2f}"
        lines.append("U|" + "|".join(changed))
    for key in rng.sample(keys, 5):  # cancelled orders: only the key is given
        blank = [""] * 34
        blank[ITEM], blank[ORDER] = key
        lines.append("D|" + "|".join(blank))
    for _ in range(4):  # late new rows
        fields = list(model[rng.choice(keys)])
        next_order[0] += 1
        fields[ORDER] = str(next_order[0])
        lines.append("I|" + "|".join(fields))
    twice = list(model[keys[0]])  # the same key twice in one batch: the later line wins
    twice[18] = "1"
    lines.append("U|" + "|".join(twice))
    twice[18] = "2"
    lines.append("U|" + "|".join(twice))
    return lines


def test_corrections_merge_like_the_model(storage: LakeStorage, catalog: LakeCatalog, spark: SparkSession) -> None:
    oracle = generated(0.01)
    days = sold_dates(oracle)[:20] + [None]
    land_facts(storage, oracle, days)
    load_fact_days(storage, spark, days, "run-load")
    model = {key_of(as_text(r)): as_text(r) for r in fact_rows(catalog)}
    rng = random.Random(6)
    next_order = [10_000_000]

    first = correction_batch(rng, model, next_order)
    second = correction_batch(rng, model, next_order)
    bad = ["X|" + "|".join(model[sorted(model)[1]]), "U|too|few", "U|" + "|".join(["1"] * 3 + [""] + ["1"] * 30)]
    storage.put_bytes(f"{RAW.corrections}20240101-000000000.dat", ("\n".join(first + bad) + "\n").encode())
    storage.put_bytes(f"{RAW.corrections}20240101-000000001.dat", ("\n".join(second) + "\n").encode())
    apply_model(model, first)
    apply_model(model, second)

    report = apply_corrections(storage, spark, "run-cdc")

    assert {key_of(as_text(r)): as_text(r) for r in fact_rows(catalog)} == model
    assert report.rows_after == len(model)
    reasons = [(r["line_number"], r["reason"]) for r in quarantine(storage)]
    n = len(first)
    assert reasons == [(n + 1, "unknown_operation"), (n + 2, "wrong_field_count"), (n + 3, "missing_key")]
    entries = {e.source_file: e for e in report.files}
    assert sum(e.rows_in_file for e in entries.values()) == len(first) + len(second) + 3
    for e in entries.values():
        assert e.rows_applied + e.rows_superseded + e.rows_quarantined == e.rows_in_file
    assert sum(e.rows_superseded for e in entries.values()) >= 1  # the key written twice
    assert pending_corrections(storage, Ledger(storage)) == []

    # a file that sorts before the applied ones is older: per key, its changes lose to the newer
    # changes of those files and apply to every other key (before: quarantined whole as `late_file`)
    touched = {key_of(line.split("|")[1:]) for line in first + second}
    late = correction_batch(rng, model, next_order)
    storage.put_bytes(f"{RAW.corrections}20231231-000000000.dat", ("\n".join(late) + "\n").encode())
    last = {key_of(line.split("|")[1:]): line for line in late}
    apply_model(model, [line for key, line in last.items() if key not in touched])
    apply_corrections(storage, spark, "run-late")
    assert {key_of(as_text(r)): as_text(r) for r in fact_rows(catalog)} == model
    assert len(quarantine(storage)) == 3  # the bad lines of the first file, nothing more
    entry = [e for e in Ledger(storage).entries(ledger_name(TpcdsTable.WEB_SALES)).to_pylist()
             if e["source_file"].endswith("20231231-000000000.dat")][0]
    superseded = len(late) - len([k for k in last if k not in touched])
    assert (entry["status"], entry["rows_applied"], entry["rows_superseded"]) == \
        ("applied", len(late) - superseded, superseded)
    assert superseded >= 2  # some keys newer changes touched, and the key written twice


def files(storage: LakeStorage) -> tuple[set[str], set[str]]:
    """The current snapshot's data files and position delete files (paths)."""
    table = storage.catalog().pyiceberg().load_table(TPCDS_WEB_SALES.identifier)
    tasks = list(table.scan().plan_files())
    return {t.file.file_path for t in tasks}, {d.file_path for t in tasks for d in t.delete_files}


def test_a_batch_changing_few_rows_writes_deletes_and_one_changing_a_quarter_rewrites_the_table(
        storage: LakeStorage, catalog: LakeCatalog, spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two commit paths, one rule: a batch changing less than a quarter of the rows is the
    merge-on-read MERGE (every data file stays; the replaced rows are position deletes, the
    upserts new files), one changing more is one overwrite of the whole table (every data file
    replaced, no delete file left). Both end where the model does, a key moved to another
    partition included, and every reader agrees (pyiceberg, DuckDB; the row count from the
    snapshot summary). (A spy that calls through records which path ran.)"""
    from lake_assets.core.formats import iceberg
    from lake_assets.resources.duckdb_reader import lake_connection

    rewrites = []
    real_rewrite = apply._rewrite
    monkeypatch.setattr(apply, "_rewrite", lambda *args: rewrites.append(1) or real_rewrite(*args))
    oracle = generated(0.01)
    dated = [d for d in sold_dates(oracle) if d is not None]
    later = [d for d in dated if (d - dated[0]).days > PARTITION_DAYS][:20]
    days = [dated[0], *later, None]  # three partitions: one day, twenty days, the rows without a date
    land_facts(storage, oracle, days)
    load_fact_days(storage, spark, days, "run-load")
    model = {key_of(as_text(r)): as_text(r) for r in fact_rows(catalog)}
    by_day: dict[str, list[tuple[str, str]]] = {}
    for key, fields in sorted(model.items()):
        by_day.setdefault(fields[0], []).append(key)
    first, second, undated = by_day[str(date_sk(dated[0]))], by_day[str(date_sk(later[0]))], by_day[""]

    def changed(key: tuple[str, str], quantity: int, day: str | None = None) -> str:
        fields = list(model[key])
        fields[18] = str(quantity)
        if day is not None:
            fields[0] = day
        return "U|" + "|".join(fields)

    def agreed() -> None:
        assert {key_of(as_text(r)): as_text(r) for r in fact_rows(catalog)} == model
        table = storage.catalog().pyiceberg().load_table(TPCDS_WEB_SALES.identifier)
        assert iceberg.row_count(table) == len(model)
        assert lake_connection(storage).execute("SELECT count(*) FROM lake.tpcds.web_sales").fetchone()[0] == len(model)

    blank = [""] * 34
    blank[ITEM], blank[ORDER] = second[0]
    narrow = [changed(first[0], 7), changed(first[1], 9, day=model[second[1]][0]),  # moves to the second partition
              "D|" + "|".join(blank), changed(undated[0], 11)]
    before, _ = files(storage)
    storage.put_bytes(f"{RAW.corrections}20240101-000000000.dat", ("\n".join(narrow) + "\n").encode())
    apply_model(model, narrow)
    report = apply_corrections(storage, spark, "run-narrow")
    agreed()
    data, deletes = files(storage)
    assert before < data and deletes  # every data file stays; the replaced rows are position deletes
    assert rewrites == []
    assert report.rows_after == len(model) == report.rows_before - 1

    wide = [changed(key, 12) for key in sorted(model)[:len(model) // 4 + 1]]
    storage.put_bytes(f"{RAW.corrections}20240101-000000001.dat", ("\n".join(wide) + "\n").encode())
    apply_model(model, wide)
    report = apply_corrections(storage, spark, "run-wide")
    agreed()
    assert rewrites == [1]
    data, deletes = files(storage)
    assert not data & before and not deletes  # the whole table rewritten, its deletes folded in, in one snapshot
    table = storage.catalog().pyiceberg().load_table(TPCDS_WEB_SALES.identifier)
    assert table.current_snapshot().parent_snapshot_id == report.snapshot_before
    assert all(e.rows_applied == e.rows_in_file for e in report.files)
