"""`lake query` speaks the SQL Databricks and Athena users type first, read-only:
SHOW TABLES, DESCRIBE [EXTENDED|HISTORY], per-reference time travel, table_changes, and
one-line errors naming the candidates. delta-rs and pyiceberg are the independent readers."""

import json

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.registry import declaration
from lake_assets.core.tables import TPCDS_ITEM
from lake_assets_tests.helpers.insurance_tables import INSURANCE
from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.cli import lake
from lake_assets_tests.insurance.test_pipeline import CDC_1, FULL, cdc, full_load, put, row, run


def rows(*args: str) -> list[dict]:
    code, out = lake("query", *args, "--format", "json")
    assert code == 0, out
    return json.loads(out)


def refused(*args: str) -> str:
    """The one-line message of a query refused as the user's mistake (exit 2)."""
    code, out = lake("query", *args)
    assert code == 2, out
    assert len(out.strip().splitlines()) == 1 and "Traceback" not in out, out
    return out.strip()


@pytest.fixture
def insurance(lake_env: LakeStorage, spark: SparkSession) -> DeltaTable:
    """insurance at version 0 = {1: 100, 2: 200}, version 1 = {1: 111, 3: 300}."""
    put(lake_env, FULL, full_load(row(1, 100), row(2, 200)))
    run(lake_env, spark)
    put(lake_env, CDC_1, cdc(f"U,{row(1, 111)}", "D,2,,,,,,,,", f"I,{row(3, 300)}"))
    run(lake_env, spark)
    return DeltaTable(INSURANCE.uri(lake_env), storage_options=lake_env.delta_storage_options())


def test_show_describe_and_history_of_a_delta_table(insurance: DeltaTable) -> None:
    shown = rows("SHOW TABLES")
    assert {"table": "insurance", "format": "delta", "domain": "insurance"} in shown
    assert "lake_ledger" in [r["table"] for r in shown]
    assert {r["table"] for r in rows("SHOW TABLES LIKE 'insurance|insurance_h*'")} == {
        "insurance", "insurance_history"}
    assert {r["table"] for r in rows("SHOW TABLES IN lake")} == {"lake_ledger"}

    described = rows("DESCRIBE insurance")
    assert [r["col_name"] for r in described] == [f.name for f in insurance.schema().fields]
    assert {"col_name": "policy_id", "data_type": "int", "comment": "Policy number: the key, unique and never null"} \
        in described
    declared = {c.name: c.description for c in declaration("insurance").columns}
    assert {r["col_name"]: r["comment"] for r in described if r["col_name"] in declared} == declared
    assert all(r["comment"] for r in described), described  # the audit columns are described too

    details = {r["col_name"]: r["data_type"] for r in rows("DESCRIBE TABLE EXTENDED insurance")}
    assert details["Format"] == "delta" and details["Version"] == insurance.version() == 1
    assert details["Rows"] == insurance.to_pyarrow_table().num_rows == 2
    assert details["Location"].endswith("/curated/insurance")

    code, history = lake("history", "insurance", "--format", "csv")
    code_sql, history_sql = lake("query", "DESCRIBE HISTORY insurance", "--format", "csv")
    assert code == code_sql == 0 and history_sql == history and history.count("\n") == 3


def test_time_travel_per_reference_on_delta(insurance: DeltaTable, lake_env: LakeStorage) -> None:
    def at(version: int) -> list[dict]:
        table = DeltaTable(INSURANCE.uri(lake_env), version=version, storage_options=lake_env.delta_storage_options())
        return sorted(table.to_pyarrow_table(columns=["policy_id", "insured_value"]).to_pylist(),
                      key=lambda r: r["policy_id"])

    select = "SELECT policy_id, insured_value FROM insurance{} ORDER BY policy_id"
    then, now = rows(select.format(" VERSION AS OF 0")), rows(select.format(""))
    assert then == at(0) == [{"policy_id": 1, "insured_value": 100}, {"policy_id": 2, "insured_value": 200}]
    assert now == at(1) != then
    first = insurance.history()[-1]["timestamp"]
    assert rows(select.format(f" TIMESTAMP AS OF '{_iso(first)}'")) == then
    assert rows(select.format(" FOR VERSION AS OF 0")) == then

    # the same table at two versions in one query, each with its alias; TABLESAMPLE kept
    assert rows("SELECT policy_id FROM insurance VERSION AS OF 0 EXCEPT SELECT policy_id FROM insurance") == [
        {"policy_id": 2}]
    assert rows("SELECT o.insured_value AS old, n.insured_value AS new FROM insurance VERSION AS OF 0 AS o "
                "JOIN insurance n ON o.policy_id = n.policy_id") == [{"old": 100, "new": 111}]
    assert rows("SELECT count(*) AS n FROM insurance VERSION AS OF 0 TABLESAMPLE (100 PERCENT)") == [{"n": 2}]
    assert rows("SELECT count(*) AS n FROM insurance TABLESAMPLE (0 PERCENT)") == [{"n": 0}]
    assert rows("SELECT count(*) AS n FROM insurance VERSION AS OF 0 AS i TABLESAMPLE (0 PERCENT) "
                "WHERE i.policy_id > 0") == [{"n": 0}]
    # the flags still work, and say no more than the SQL
    assert rows(select.format(""), "--version", "0") == then
    assert "not both" in refused(select.format(" VERSION AS OF 0"), "--version", "1")
    assert "versions 0 to 1, not 7" in refused(select.format(" VERSION AS OF 7"))
    assert "--engine spark" in refused(select.format(" VERSION AS OF 0"), "--engine", "duckdb")


def test_table_changes_is_lake_changes(insurance: DeltaTable) -> None:
    code, out = lake("changes", "insurance", "--from-version", "1", "--all-columns", "--format", "json")
    assert code == 0, out
    # Spark shows timestamps in the session's time zone (UTC) without an offset; `lake changes` with one
    expected = [{k: v.removesuffix("+00:00") if isinstance(v, str) else v for k, v in r.items()}
                for r in json.loads(out)]
    assert rows("SELECT * FROM table_changes('insurance', 1) ORDER BY _change_type, policy_id") == sorted(
        expected, key=lambda r: (r["_change_type"], r["policy_id"]))
    assert rows("SELECT _change_type, count(*) AS n FROM table_changes('insurance', 0, 1) c "
                "WHERE c._commit_version = 1 GROUP BY 1 ORDER BY 1") == [
        {"_change_type": "delete", "n": 1}, {"_change_type": "insert", "n": 1},
        {"_change_type": "update_postimage", "n": 1}, {"_change_type": "update_preimage", "n": 1}]
    assert "tables with one: insurance" in refused("SELECT * FROM table_changes('insurance_quarantine', 0)")
    assert "table_changes takes" in refused("SELECT * FROM table_changes('insurance', current_date())")
    assert "--engine spark" in refused("SELECT * FROM table_changes('insurance', 0)", "--engine", "duckdb")


def test_mistakes_name_the_candidates_in_one_line(insurance: DeltaTable) -> None:
    assert refused("SELECT policy FROM insurance").endswith(
        "column policy not found in insurance; did you mean policy_id?")
    assert refused("SELECT * FROM insurence").endswith(
        "table insurence is not a lake table; did you mean insurance? (see SHOW TABLES)")
    assert refused("DESCRIBE insurence").endswith("did you mean insurance? (see SHOW TABLES)")
    typo = refused("SELEC * FROM insurance")
    assert "line 1, column 12" in typo and "'FROM'" in typo and "Mul" not in typo
    assert refused("SELECT _change_typ FROM table_changes('insurance', 1)").endswith(
        "column _change_typ not found in table_changes('insurance', 1); did you mean _change_type?")
    assert "SHOW TABLES" in refused("SHOW FUNCTIONS")
    assert "DESCRIBE HISTORY" in refused("DESCRIBE insurance", "--version", "0")
    assert "DESCRIBE takes a lake table" in refused("DESCRIBE insurance VERSION AS OF 0")
    assert {"table": "insurance", "format": "delta", "domain": "insurance"} in rows(
        "SHOW TABLES", "--engine", "duckdb")


def test_time_travel_describe_and_history_of_an_iceberg_table(lake_env: LakeStorage, catalog: LakeCatalog) -> None:
    client = catalog.pyiceberg()
    client.create_namespace_if_not_exists("tpcds")
    schema = pa.schema([("i_item_sk", pa.int64()), ("i_brand", pa.string())])
    item = client.create_table(TPCDS_ITEM.identifier, schema=schema)
    item.append(pa.table({"i_item_sk": [1, 2], "i_brand": ["a", "b"]}, schema=schema))
    first = item.current_snapshot()
    item.append(pa.table({"i_item_sk": [3], "i_brand": ["c"]}, schema=schema))
    item = client.load_table(TPCDS_ITEM.identifier)
    then = item.scan(snapshot_id=first.snapshot_id).to_arrow().sort_by("i_item_sk")["i_item_sk"].to_pylist()

    select = "SELECT i.i_item_sk FROM tpcds.item{} AS i ORDER BY i.i_item_sk"
    assert [r["i_item_sk"] for r in rows(select.format(f" VERSION AS OF {first.snapshot_id}"))] == then == [1, 2]
    assert [r["i_item_sk"] for r in rows(select.format(""))] == [1, 2, 3]
    assert [r["i_item_sk"] for r in rows(select.format(f" TIMESTAMP AS OF '{_iso(first.timestamp_ms)}'"))] == then
    assert rows(f"SELECT i_item_sk FROM tpcds.item EXCEPT SELECT i_item_sk FROM tpcds.item "
                f"VERSION AS OF {first.snapshot_id}") == [{"i_item_sk": 3}]
    assert "no snapshot 1;" in refused("SELECT * FROM tpcds.item VERSION AS OF 1")
    assert "--engine spark" in refused(select.format(" VERSION AS OF 1"), "--engine", "duckdb")

    assert [r["table"] for r in rows("SHOW TABLES IN tpcds")] == ["tpcds.item"]
    details = {r["col_name"]: r["data_type"] for r in rows("DESCRIBE EXTENDED tpcds.item")}
    assert details["i_item_sk"] == "bigint" and details["Format"] == "iceberg"
    assert details["Snapshot"] == item.current_snapshot().snapshot_id and details["Rows"] == 3
    code, history = lake("history", "tpcds.item", "--format", "csv")
    assert code == 0 and lake("query", "DESCRIBE HISTORY tpcds.item", "--format", "csv") == (0, history)
    # the star's tables have a change feed derived from their snapshots (pyiceberg)
    assert rows(f"SELECT _commit_version, _change_type, i_item_sk FROM table_changes('tpcds.item', "
                f"{first.snapshot_id}) ORDER BY _commit_version = {first.snapshot_id} DESC, i_item_sk") == [
        {"_commit_version": first.snapshot_id, "_change_type": "insert", "i_item_sk": k} for k in (1, 2)] + [
        {"_commit_version": item.current_snapshot().snapshot_id, "_change_type": "insert", "i_item_sk": 3}]
    assert "not an ancestor" in refused("SELECT * FROM table_changes('tpcds.item', 1)")


def _iso(millis: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).isoformat()


def test_jvm_sparks_analysis_errors_read_the_same() -> None:
    """JVM Spark (the local and remote engines) words unresolved names otherwise than Sail."""
    from lake_assets.cli.sql_errors import from_engine

    column = Exception("[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column or function parameter with name `i`.`policy` "
                       "cannot be resolved. Did you mean one of the following? [`i`.`policy_id`].; line 1 pos 7")
    assert str(from_engine(column, ["insurance"], lambda: ["policy_id", "insured_value"])) == \
        "column i.policy not found in insurance; did you mean policy_id?"
    missing = Exception("[TABLE_OR_VIEW_NOT_FOUND] The table or view `insurence` cannot be found. Verify ...")
    assert str(from_engine(missing, [], list)) == \
        "table insurence is not a lake table; did you mean insurance? (see SHOW TABLES)"
    assert from_engine(Exception("[DIVIDE_BY_ZERO] Division by zero."), ["insurance"], list) is None


@pytest.mark.parametrize("sql", ["DESCRIBE insurance; DROP TABLE insurance", "DESCRIBE FUNCTION abs",
                                 "DESCRIBE SELECT 1", "DESCRIBE delta.`s3://lake/curated/insurance`",
                                 "SHOW TABLES; DROP TABLE insurance", "SHOW CREATE TABLE insurance"])
def test_show_and_describe_take_nothing_but_lake_tables(sql: str) -> None:
    from lake_assets.cli.sql_statements import lake_statement
    from lake_assets.core.errors import UsageError

    with pytest.raises(UsageError):
        lake_statement(sql)
