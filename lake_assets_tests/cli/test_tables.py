"""A team's own table, declared from a sample CSV through `lake table` alone (issue 30): scaffolded,
checked, loaded (a full load, then CDC files), and read back as a table with its SCD2 history,
change feed and ledger; bad declarations are one line and start nothing."""

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lake_assets.core import registry
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.raw_contract import STAR_TABLES
from lake_assets_tests.helpers.cli import lake

SAMPLE = "order_id,customer,amount,placed_on\n1,ann,10.50,2024-01-02\n2,bob,3.00,2024-01-03\n3,cyd,7.25,2024-01-04\n"


def _read(storage: LakeStorage, name: str) -> list[dict]:
    uri = storage.uri(f"curated/{name}")
    return DeltaTable(uri, storage_options=storage.delta_storage_options()).to_pyarrow_table().to_pylist()


def test_a_table_declared_from_a_sample_is_built_loaded_and_kept(lake_env: LakeStorage, tables_dir: Path,
                                                                 tmp_path: Path) -> None:
    sample = tmp_path / "orders.csv"
    sample.write_text(SAMPLE)
    code, out = lake("table", "add", "orders", "--sample", str(sample))
    assert code == 0, out
    declared = (tables_dir / "orders.yaml").read_text()
    assert "keys: [order_id]  # review" in declared and "{name: amount, type: DOUBLE" in declared
    code, out = lake("table", "check")
    assert code == 0 and "ok: orders (4 columns, key order_id)" in out, out
    assert "ok: tpcds.web_sales (34 columns, key ws_item_sk, ws_order_number; the TPC-DS star's)" in out, out
    code, out = lake("table", "list", "--format", "json")
    listed = json.loads(out)
    assert {t["table"]: t["partitioned by"] for t in listed if t["applied by"] == "change core"
            and t["group"] != "tpcds"} == {"insurance": "none", "orders": "none"}
    assert {(t["group"], t["table"], t["applied by"], Path(t["declared in"]).name) for t in listed
            if t["group"] == "tpcds"} == {("tpcds", name, "TPC-DS star loader" if name == "web_sales" else "change core",
                                           f"{name}.yaml") for name in STAR_TABLES}

    assert lake("put", str(sample), "--to", "orders:snapshot")[0] == 0
    code, out = lake("run")
    assert code == 0 and "orders: created at version 0" in out, out
    cdc = tmp_path / "20240105-100000000.csv"
    cdc.write_text("U,1,ann,11.00,2024-01-02\nD,2,,,\nI,4,dee,1.00,2024-01-05\nU,5,eve,lots,2024-01-05\n")
    assert lake("put", str(cdc), "--to", "orders:cdc")[0] == 0
    code, out = lake("run")
    assert code == 0, out
    assert "orders: version 0 -> 1" in out and "check orders_history: matches_table: passed" in out

    rows = {r["order_id"]: (r["customer"], r["amount"]) for r in _read(lake_env, "orders")}
    assert rows == {1: ("ann", 11.0), 3: ("cyd", 7.25), 4: ("dee", 1.0)}
    history = sorted((r["order_id"], r["_operation"], r["is_current"]) for r in _read(lake_env, "orders_history"))
    assert history == [(1, "L", False), (1, "U", True), (2, "D", False), (2, "L", False), (3, "L", True),
                       (4, "I", True)]
    quarantined = _read(lake_env, "orders_quarantine")
    assert [(q["line_number"], q["reason"]) for q in quarantined] == [(4, "bad_number")]
    code, out = lake("status", "--format", "json")
    status = {r["file"]: r for r in json.loads(out) if r["file"].startswith("raw/orders/")}
    assert [(r["status"], r["rows"], r["applied"] + r["superseded"] + r["quarantined"]) for r in status.values()] \
        == [("applied", 3, 3), ("applied", 4, 4)]
    code, out = lake("changes", "orders", "--from-version", "1", "--format", "json")
    assert code == 0, out
    assert sorted((c["_change_type"], c["order_id"]) for c in json.loads(out)) == [
        ("delete", 2), ("insert", 4), ("update_postimage", 1), ("update_preimage", 1)]


@pytest.mark.parametrize(("declaration", "expected"), [
    ("name: bad\ngroup: x\nkeys: []\ncolumns: [{name: a, type: INT}]\nsources: [{prefix: raw/bad/, kind: cdc}]\n",
     "keys: declare at least one key column"),
    ("name: bad\ngroup: x\nkeys: [a]\ncolumns: [{name: a, type: INT}]\ntrack_history: [b]\n"
     "sources: [{prefix: raw/bad/, kind: cdc}]\n", "track_history: b not among the columns"),
    ("name: bad\ngroup: x\nkeys: [a]\ncolumns: [{name: a, type: MONEY}]\nsources: [{prefix: raw/bad/, kind: cdc}]\n",
     "type 'MONEY' is not one of"),
    ("name: bad\ngroup: x\nkeys: [a]\ncolumns: [{name: a, type: INT}]\nsources: [{prefix: raw/cdcload/, kind: cdc}]\n",
     "overlaps raw/cdcload/, the raw prefix of table insurance"),
])
def test_a_bad_declaration_is_one_line_and_starts_nothing(lake_env: LakeStorage, tables_dir: Path,
                                                          declaration: str, expected: str) -> None:
    tables_dir.mkdir()
    (tables_dir / "bad.yaml").write_text(declaration)
    for command in (("table", "check"), ("run",)):
        registry.declarations.cache_clear()
        code, out = lake(*command)
        assert code == 2 and expected in out and "Traceback" not in out, out
        assert len([line for line in out.splitlines() if line.strip()]) == 1, out
    assert not lake_env.list_objects("curated/")  # nothing started: no table, no ledger
