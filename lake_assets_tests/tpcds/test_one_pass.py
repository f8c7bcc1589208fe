"""Day loads in one pass: no line numbers or staged copy for valid rows, yet every line accounted for.

Valid lines carry their object's one sequence (whatever order the engine reads them in); a key
listed twice is ranked by line only when the survey finds one, and its last line wins; the
quarantine keeps the true line numbers of rejects.
"""

import random
import re
from collections import Counter

from pyiceberg.table.snapshots import Operation
from pyspark.sql import SparkSession

from lake_assets.core.formats import iceberg
from lake_assets.core.raw_zone import list_raw
from lake_assets.core.tables import table as lake_table

from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.checks import evaluate_rows_accounted, evaluate_rows_match_raw
from lake_assets.tpcds import load
from lake_assets.tpcds.load import PLAIN, load_fact_days, survey
from lake_assets.tpcds.parse import LINE, REASON, SOURCE, numbered, parse, plain_line, valid_rows
from lake_assets.tpcds.schema import COLUMNS, KEYS, SEQUENCE, TpcdsTable, date_sk, ledger_name
from lake_assets.tpcds.sequencing import SNAPSHOT_ROW, object_prefix
from lake_assets_tests.helpers.tpcds import fact_key, generated, land_facts, sold_dates
from lake_assets_tests.helpers.tpcds_model import key_of
from lake_assets_tests.tpcds.test_load import quarantine
from lake_assets_tests.tpcds.test_sequenced import QUANTITY, day_lines, entries, put_lines, rows_by_key

WEB_SALES = ledger_name(TpcdsTable.WEB_SALES)
KEYS_OF_TABLE = KEYS[TpcdsTable.WEB_SALES]
KEY_FIELDS = [[c for c, _ in COLUMNS[TpcdsTable.WEB_SALES]].index(k) for k in KEYS_OF_TABLE]
PLAIN_LINE = plain_line(COLUMNS[TpcdsTable.WEB_SALES], KEYS_OF_TABLE)


def test_survey_counts_lines_and_valid_lines_and_finds_keys_listed_twice_or_held(spark: SparkSession) -> None:
    schema = f"{SOURCE} STRING, ws_item_sk BIGINT, ws_order_number BIGINT, {REASON} STRING"
    unique = [("a", 1, 1, None), ("a", 1, 2, None), ("b", 2, 1, None), ("b", 1, 1, "bad_value"),
              ("b", None, None, "missing_key"), ("b", None, None, "wrong_field_count")]
    counts = {"a": (2, 2), "b": (4, 1)}
    assert survey(spark.createDataFrame(unique, schema)) == (counts, False, False)
    within = [*unique, ("a", 1, 2, None)]
    assert survey(spark.createDataFrame(within, schema)) == ({"a": (3, 3), "b": (4, 1)}, True, False)
    across = [*unique, ("b", 1, 2, None)]
    assert survey(spark.createDataFrame(across, schema)) == ({"a": (2, 2), "b": (5, 2)}, True, False)
    keys = "ws_item_sk BIGINT, ws_order_number BIGINT"
    assert survey(spark.createDataFrame(unique, schema), spark.createDataFrame([(9, 9), (9, 9)], keys)) == \
        (counts, False, False)
    assert survey(spark.createDataFrame(unique, schema), spark.createDataFrame([(2, 1), (2, 1)], keys)) == \
        (counts, False, True)
    # a key held only by a rejected line is not applied, so it does not count
    assert survey(spark.createDataFrame(unique, schema), spark.createDataFrame([(None, None)], keys)) == \
        (counts, False, False)


def test_valid_rows_are_the_lines_without_a_reason(spark: SparkSession) -> None:
    columns = [("k", "BIGINT"), ("n", "DECIMAL(7,2)")]
    lines = spark.createDataFrame([("a", "1|2.50"), ("a", "2|lots"), ("a", "|3"), ("a", "3|"), ("a", "4|1|9")],
                                  f"{SOURCE} STRING, value STRING")
    parsed = parse(lines, columns, ["k"])
    expected = sorted((r["k"], r["n"]) for r in parsed.collect() if r[REASON] is None)
    assert sorted((r["k"], r["n"]) for r in valid_rows(parsed).collect()) == expected
    assert [k for k, _ in expected] == [1, 3]


def test_a_key_twice_in_one_day_object_takes_its_last_line(storage: LakeStorage, catalog: LakeCatalog,
                                                          spark: SparkSession) -> None:
    oracle = generated(0.01)
    days = sold_dates(oracle)[:2]
    land_facts(storage, oracle, days)
    lines = day_lines(storage, days[0])
    again = lines[0].split("|")
    again[QUANTITY] = "77"
    put_lines(storage, fact_key(days[0]), [*lines, "1|2|3", "|".join(again)])  # a reject, then the key again
    engine = SparkEngine()

    load_fact_days(storage, spark, days, "run-empty")  # into the empty table: appended
    assert rows_by_key(catalog)[key_of(again)] == again
    latest = {e["source_file"]: e for e in entries(storage)}
    day = latest[fact_key(days[0])]
    assert (day["rows_in_file"], day["rows_applied"], day["rows_superseded"], day["rows_quarantined"]) == \
        (len(lines) + 2, len(lines), 1, 1)
    assert [(r["line_number"], r["reason"]) for r in quarantine(storage)] == [(len(lines) + 1, "wrong_field_count")]
    assert evaluate_rows_match_raw(storage, engine).passed and evaluate_rows_accounted(storage, engine).passed
    sequences = {r[SEQUENCE] for r in spark.table("tpcds.web_sales").where(f"ws_sold_date_sk = {date_sk(days[0])}")
                 .select(SEQUENCE).collect()}
    assert sequences == {object_prefix(day["source_sequence"]) + SNAPSHOT_ROW}  # one sequence, not line numbers

    again[QUANTITY] = "78"  # a new delivery into the loaded table: MERGEd, the last line wins again
    put_lines(storage, fact_key(days[0]), [*lines, "|".join(again)])
    load_fact_days(storage, spark, [days[0]], "run-merge")
    table = rows_by_key(catalog)
    assert table[key_of(again)] == again
    assert len(table) == len(lines) + len(day_lines(storage, days[1]))
    day = {e["source_file"]: e for e in entries(storage)}[fact_key(days[0])]
    assert (day["rows_in_file"], day["rows_applied"], day["rows_superseded"], day["rows_quarantined"]) == \
        (len(lines) + 1, len(lines), 1, 0)
    assert evaluate_rows_match_raw(storage, engine).passed and evaluate_rows_accounted(storage, engine).passed

    # a new day of new keys into the loaded table: appended, not MERGEd
    third = sold_dates(oracle)[2]
    land_facts(storage, oracle, [third])
    load_fact_days(storage, spark, [third], "run-new-day")
    current = iceberg.open_table(storage, lake_table(WEB_SALES))
    assert current.current_snapshot().summary.operation == Operation.APPEND
    assert len(rows_by_key(catalog)) == len(table) + len(day_lines(storage, third))
    assert evaluate_rows_match_raw(storage, engine).passed and evaluate_rows_accounted(storage, engine).passed


def test_an_append_parses_once_and_counts_rejects_as_lines_less_the_rows_applied(
        storage: LakeStorage, catalog: LakeCatalog, spark: SparkSession) -> None:
    oracle = generated(0.01)
    days = sold_dates(oracle)[:3]
    land_facts(storage, oracle, days[:2])
    lines = day_lines(storage, days[0])
    fields = lines[0].split("|")
    bad_value = fields[:17] + ["999999992", "lots"] + fields[19:]  # a key of its own
    wrong_day = [str(date_sk(days[0]) + 1), *fields[1:17], "999999993", *fields[18:]]
    put_lines(storage, fact_key(days[0]), [lines[0], "only|three|fields", "|".join(bad_value), *lines[1:],
                                           "|".join(wrong_day)])
    engine = SparkEngine()

    report = load_fact_days(storage, spark, days[:2], "run-append")
    assert list(report.steps) == ["survey", "commit", "quarantine"]  # keys surveyed, ONE parse appended, then rejects
    current = iceberg.open_table(storage, lake_table(WEB_SALES))
    assert current.current_snapshot().summary.operation == Operation.APPEND
    assert len(rows_by_key(catalog)) == len(lines) + len(day_lines(storage, days[1]))
    day = {e["source_file"]: e for e in entries(storage)}[fact_key(days[0])]
    assert (day["rows_in_file"], day["rows_applied"], day["rows_superseded"], day["rows_quarantined"]) == \
        (len(lines) + 3, len(lines), 0, 3)
    assert [(r["line_number"], r["reason"]) for r in quarantine(storage)] == [
        (2, "wrong_field_count"), (3, "bad_value"), (len(lines) + 3, "wrong_partition")]
    assert evaluate_rows_match_raw(storage, engine).passed and evaluate_rows_accounted(storage, engine).passed

    # a reject repeating a valid line's key: the key survey cannot rule the key out, so the parse is surveyed
    land_facts(storage, oracle, [days[2]])
    third = day_lines(storage, days[2])
    again = third[0].split("|")
    again[QUANTITY] = "lots"
    put_lines(storage, fact_key(days[2]), [*third, "|".join(again)])
    report = load_fact_days(storage, spark, [days[2]], "run-append-again")
    assert list(report.steps) == ["survey", "quarantine", "commit"]
    current = iceberg.open_table(storage, lake_table(WEB_SALES))
    assert current.current_snapshot().summary.operation == Operation.APPEND  # still an append: keys are new
    day = {e["source_file"]: e for e in entries(storage)}[fact_key(days[2])]
    assert (day["rows_in_file"], day["rows_applied"], day["rows_quarantined"]) == (len(third) + 1, len(third), 1)
    assert rows_by_key(catalog)[key_of(third[0].split("|"))] == third[0].split("|")
    assert evaluate_rows_match_raw(storage, engine).passed and evaluate_rows_accounted(storage, engine).passed


#: Field values around the plain-line pattern's edges: plain ones, and ones it refuses (valid or not).
_EDGE_VALUES = ["", "0", "-0", "007", "-5", "999999999999999999", "9999999999999999999", "1.5", "1.55",
                "1.555", "12345.67", "123456.7", "-99999.99", "+5", " 5", "5.", ".5", "1e3", "abc", "\"1\""]


def test_plain_lines_are_valid_and_the_csv_reader_types_them_as_the_parse_does(
        storage: LakeStorage, spark: SparkSession) -> None:
    oracle = generated(0.01)
    day = sold_dates(oracle)[0]
    land_facts(storage, oracle, [day])
    template = day_lines(storage, day)[0].split("|")
    rng = random.Random(7)
    lines = []
    for number in range(400):  # every field of some lines takes an edge value (keys kept unique)
        fields = list(template)
        for _ in range(rng.randint(0, 3)):
            fields[rng.randrange(len(fields))] = rng.choice(_EDGE_VALUES)
        fields[KEY_FIELDS[1]] = str(10_000_000 + number) if rng.random() > 0.05 else rng.choice(_EDGE_VALUES)
        lines.append("|".join(fields))
    lines += ["|".join(template[:-1]), "|".join([*template, "1"]), ""]  # field counts
    put_lines(storage, fact_key(day), lines)
    folder = {str(date_sk(day)): list_raw(storage, fact_key(day))[0]}

    plain = [r[PLAIN] for r in load._line_keys(load._fact_lines(storage, spark, folder, False)).collect()]
    parsed = load._parse_facts(numbered(load._fact_lines(storage, spark, folder, False))).collect()
    by_line = {r[LINE]: r for r in parsed}
    assert len(plain) == len(lines) and 0 < sum(plain) < len(lines)  # both kinds are in the sample
    plain_lines = {i + 1 for i, line in enumerate(lines)  # the pattern, read by Python; and the line's own day
                   if re.fullmatch(PLAIN_LINE, line) and line.split("|")[0] == str(date_sk(day))}
    assert sum(plain) == len(plain_lines)
    assert all(by_line[n][REASON] is None for n in plain_lines)  # plain lines are valid
    assert any(by_line[n][REASON] is None for n in set(by_line) - plain_lines)  # not every valid line is plain

    # the CSV reader is given only objects of plain lines (it fails on a wrong field count): here, another day's
    other = sold_dates(oracle)[1]
    put_lines(storage, fact_key(other), [lines[n - 1] for n in sorted(plain_lines)])
    typed = load._fact_csv(storage, spark, {str(date_sk(other)): list_raw(storage, fact_key(other))[0]}, False)
    assert Counter(tuple(r) for r in typed.collect()) == Counter(
        (str(date_sk(other)), *(by_line[n][c] for c in load.RAW_COLUMNS)) for n in plain_lines)
