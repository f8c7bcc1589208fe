"""`lake changes`: the change feed between versions, as a table, CSV or JSON."""

import json

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets_tests.helpers.insurance_tables import INSURANCE
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


def _snapshot_diff(handle, before: int, after: int) -> list[tuple[str, tuple, tuple]]:
    """The oracle: two full scans of the table (pyiceberg) compared per key in Python."""
    keys = ("ws_item_sk", "ws_order_number")

    def rows(snapshot: int) -> dict[tuple, tuple]:
        return {tuple(r[k] for k in keys): tuple(sorted(r.items()))
                for r in handle.scan(snapshot_id=snapshot).to_arrow().to_pylist()}
    old, new = rows(before), rows(after)
    changes = []
    for key in sorted(old.keys() | new.keys()):
        if key not in new:
            changes.append(("delete", key, old[key]))
        elif key not in old:
            changes.append(("insert", key, new[key]))
        elif old[key] != new[key]:
            changes += [("update_preimage", key, old[key]), ("update_postimage", key, new[key])]
    return changes


def _cdc_line(operation: str, row: dict, columns: list[str]) -> str:
    return operation + "|" + "|".join("" if row[c] is None else str(row[c]) for c in columns)


def test_tpcds_changes_are_derived_from_the_iceberg_snapshots(lake_env: LakeStorage, catalog, spark) -> None:
    from lake_assets.core.formats import iceberg
    from lake_assets.core.tables import TPCDS_WEB_SALES
    from lake_assets.tpcds.corrections import apply_corrections
    from lake_assets.tpcds.load import load_fact_days
    from lake_assets.tpcds.schema import RAW
    from lake_assets_tests.helpers.tpcds import generated, land_facts, sold_dates

    oracle = generated(0.01)
    days = sold_dates(oracle)[:4]
    land_facts(lake_env, oracle, days)
    load_fact_days(lake_env, spark, days, "run-load")
    handle = iceberg.open_table(lake_env, TPCDS_WEB_SALES)
    loaded = handle.current_snapshot().snapshot_id
    sample = handle.scan(limit=3).to_arrow().to_pylist()
    changed = dict(sample[0], ws_quantity=999)
    columns = [f.name for f in handle.schema().fields if not f.name.startswith("_")]
    lines = [_cdc_line("U", changed, columns), _cdc_line("D", sample[1], columns)]
    lake_env.put_bytes(f"{RAW.corrections}20240101-000000000.dat", ("\n".join(lines) + "\n").encode())
    apply_corrections(lake_env, spark, "run-cdc")
    handle = iceberg.open_table(lake_env, TPCDS_WEB_SALES)
    corrected = handle.current_snapshot().snapshot_id

    code, out = lake("changes", "tpcds.web_sales", "--from-version", str(corrected), "--format", "json")
    assert code == 0, out
    feed = json.loads(out)
    expected = _snapshot_diff(handle, loaded, corrected)
    assert [(r["_change_type"], (r["ws_item_sk"], r["ws_order_number"])) for r in feed] == \
        [(change, key) for change, key, _ in expected]
    assert {r["_commit_version"] for r in feed} == {corrected}
    assert [r["ws_quantity"] for r in feed if r["_change_type"] == "update_postimage"] == [999]
    assert len(feed) == 3  # one update (pre + post) and one delete: the carried-over rows are not changes

    code, out = lake("changes", "tpcds.web_sales", "--from-version", str(loaded), "--format", "json")
    assert code == 0, out
    first = json.loads(out)
    assert sum(1 for r in first if r["_change_type"] == "insert" and r["_commit_version"] == loaded) == \
        len(handle.scan(snapshot_id=loaded).to_arrow())

    code, out = lake("query", f"SELECT _change_type, count(*) AS n FROM table_changes('tpcds.web_sales', {corrected}) "
                     "GROUP BY _change_type ORDER BY _change_type", "--format", "csv")
    assert code == 0 and out.splitlines()[1:] == ["delete,1", "update_postimage,1", "update_preimage,1"], out

    # that correction was merge-on-read (position deletes); a batch changing a quarter of the rows
    # rewrites the table: its feed is the rows it replaced less those already deleted, against its rows
    assert handle.current_snapshot().summary.additional_properties.get("added-position-deletes") == "2"
    rows = sorted(handle.scan().to_arrow().to_pylist(), key=lambda r: (r["ws_item_sk"], r["ws_order_number"]))
    wide = [_cdc_line("U", dict(r, ws_quantity=1000 + i), columns) for i, r in enumerate(rows[:len(rows) // 4 + 1])]
    lake_env.put_bytes(f"{RAW.corrections}20240101-000000001.dat", ("\n".join(wide) + "\n").encode())
    apply_corrections(lake_env, spark, "run-wide")
    handle = iceberg.open_table(lake_env, TPCDS_WEB_SALES)
    rewritten = handle.current_snapshot().snapshot_id
    assert handle.current_snapshot().summary.additional_properties.get("total-delete-files") == "0"
    code, out = lake("changes", "tpcds.web_sales", "--from-version", str(rewritten), "--format", "json")
    assert code == 0, out
    assert [(r["_change_type"], (r["ws_item_sk"], r["ws_order_number"])) for r in json.loads(out)] == \
        [(change, key) for change, key, _ in _snapshot_diff(handle, corrected, rewritten)]
    assert len(json.loads(out)) == 2 * len(wide)

    code, out = lake("changes", "tpcds.web_sales", "--from-version", "12345")
    assert code == 2 and "not an ancestor" in out
