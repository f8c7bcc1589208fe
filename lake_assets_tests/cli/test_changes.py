"""`lake changes`: the change feed between versions, as a table, CSV or JSON."""

import json

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.tables import INSURANCE
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.cli import lake
from lake_assets_tests.insurance.test_pipeline import CDC_1, FULL, cdc, full_load, put, row, run


def test_changes_between_versions_in_every_format(lake_env: LakeStorage, spark: SparkSession) -> None:
    put(lake_env, FULL, full_load(row(1, 100), row(2, 200)))
    run(lake_env, spark)
    put(lake_env, CDC_1, cdc(f"U,{row(1, 111)}", "D,2,,,,,,,,", f"I,{row(3, 300)}"))
    run(lake_env, spark)

    code, out = lake("changes", "insurance", "--from-version", "1", "--format", "json")
    assert code == 0, out
    rows = json.loads(out)
    assert [(r["_commit_version"], r["_change_type"], r["policy_id"], r["insured_value"]) for r in rows] == [
        (1, "update_preimage", 1, 100), (1, "update_postimage", 1, 111), (1, "delete", 2, 200), (1, "insert", 3, 300)]
    assert "_sequence" not in rows[0] and rows[0]["_commit_timestamp"].endswith("+00:00")

    code, out = lake("changes", "insurance", "--from-version", "0", "--to-version", "0", "--format", "csv")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("_commit_version,_commit_timestamp,_change_type,policy_id,")
    assert [line.split(",")[2:4] for line in lines[1:]] == [["insert", "1"], ["insert", "2"]]

    code, out = lake("changes", "insurance", "--from-version", "1", "--all-columns", "--format", "json")
    assert code == 0 and json.loads(out)[0]["_source_file"] == FULL

    code, out = lake("changes", "insurance", "--from-version", "0")
    assert code == 0 and "update_postimage" in out and "insurance changes" in out

    code, out = lake("query", "SELECT policy_id, insured_value, is_current FROM insurance_history "
                     "WHERE _operation <> 'D' ORDER BY policy_id, _sequence", "--format", "csv")
    assert code == 0 and out.splitlines()[1:] == ["1,100,False", "1,111,True", "2,200,False", "3,300,True"]

    # a commit made outside a run (here a delta-rs restore) shows before any run catches up
    DeltaTable(INSURANCE.uri(lake_env), storage_options=lake_env.delta_storage_options()).restore(0)
    code, out = lake("changes", "insurance", "--from-version", "2", "--format", "json")
    assert code == 0, out
    assert [(r["_change_type"], r["policy_id"]) for r in json.loads(out)] == [
        ("update_preimage", 1), ("update_postimage", 1), ("insert", 2), ("delete", 3)]


def test_changes_refuses_what_it_cannot_answer(lake_env: LakeStorage, spark: SparkSession) -> None:
    code, out = lake("changes", "insurance", "--from-version", "0")
    assert code == 2 and "does not exist yet" in out
    put(lake_env, FULL, full_load(row(1, 100)))
    run(lake_env, spark)
    code, out = lake("changes", "insurance", "--from-version", "5")
    assert code == 2 and "versions 0 to 0, not 5" in out
    code, out = lake("changes", "insurance", "--from-version", "1", "--to-version", "0")
    assert code == 2 and "--to-version" in out
    code, out = lake("changes", "insurance_quarantine", "--from-version", "0")
    assert code == 2 and "has no change feed" in out
    code, out = lake("changes", "nope", "--from-version", "0")
    assert code == 2 and "unknown table" in out
