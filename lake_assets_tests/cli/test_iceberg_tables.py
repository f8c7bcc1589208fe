"""A declared table kept as Iceberg (`format: iceberg`): the one change core builds it in the
catalog, applies a full load and CDC files to it, keeps its SCD2 history, quarantine and ledger
beside it (Delta), runs its checks, and the CLI queries it, lists its snapshots, reads its
changes from them, maintains it, and restores it to an earlier snapshot (the ledger, tombstones
and history going back with it) from which `lake run --reapply` applies the reverted file
again. The table is read back by pyiceberg, not by the engine that wrote it."""

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from lake_assets.core.ledger import APPLIED, Ledger, LedgerEntry
from lake_assets.core.tables import LEDGER
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.cli import lake

SAMPLE = "order_id,customer,amount,placed_on\n1,ann,10.50,2024-01-02\n2,bob,3.00,2024-01-03\n3,cyd,7.25,2024-01-04\n"
NAMESPACE = "shop"


def _ledger(storage: LakeStorage) -> pa.Table:
    """The ledger as delta-rs reads it: its entries as written, not as the lake reads them."""
    return DeltaTable(storage.uri(LEDGER.prefix), storage_options=storage.delta_storage_options()).to_pyarrow_table()


def _iceberg(storage: LakeStorage):
    return storage.catalog().pyiceberg().load_table((NAMESPACE, "orders"))


def test_an_iceberg_table_is_declared_loaded_checked_and_read(lake_env: LakeStorage, tables_dir: Path,
                                                             tmp_path: Path) -> None:
    lake_env.catalog().drop_namespace(NAMESPACE)  # the session's catalog is shared by the tests
    sample = tmp_path / "orders.csv"
    sample.write_text(SAMPLE)
    assert lake("table", "add", "orders", "--sample", str(sample), "--format", "iceberg")[0] == 0
    path = tables_dir / "orders.yaml"
    path.write_text(path.read_text().replace("group: orders", f"group: {NAMESPACE}"))
    code, out = lake("table", "check")
    assert code == 0, out

    assert lake("put", str(sample), "--to", "orders:snapshot")[0] == 0
    code, out = lake("run")
    assert code == 0 and "orders: created at" in out, out
    first = _iceberg(lake_env).current_snapshot().snapshot_id
    assert f"-> {NAMESPACE}.orders snapshot {first} (3 rows)" in out, out  # the file's fate names the snapshot
    cdc = tmp_path / "20240105-100000000.csv"
    cdc.write_text("U,1,ann,11.00,2024-01-02\nD,2,,,\nI,4,dee,1.00,2024-01-05\nU,5,eve,lots,2024-01-05\n")
    assert lake("put", str(cdc), "--to", "orders:cdc")[0] == 0
    code, out = lake("run")
    assert code == 0, out
    assert "check orders_history: matches_table: passed" in out and "failed" not in out, out

    table = _iceberg(lake_env)
    rows = {r["order_id"]: (r["customer"], r["amount"]) for r in table.scan().to_arrow().to_pylist()}
    assert rows == {1: ("ann", 11.0), 3: ("cyd", 7.25), 4: ("dee", 1.0)}
    second = table.current_snapshot()
    assert second.parent_snapshot_id == first
    options = lake_env.delta_storage_options()
    history = DeltaTable(lake_env.uri("curated/orders_history"), storage_options=options).to_pyarrow_table()
    assert sorted((r["order_id"], r["_operation"], r["is_current"]) for r in history.to_pylist()) == [
        (1, "L", False), (1, "U", True), (2, "D", False), (2, "L", False), (3, "L", True), (4, "I", True)]
    quarantined = DeltaTable(lake_env.uri("curated/orders_quarantine"), storage_options=options).to_pyarrow_table()
    assert [(q["line_number"], q["reason"]) for q in quarantined.to_pylist()] == [(4, "bad_number")]
    code, out = lake("status", "--format", "json")
    status = [r for r in json.loads(out) if r["file"].startswith("raw/orders/")]
    assert [(r["status"], r["rows"], r["applied"] + r["superseded"] + r["quarantined"]) for r in status] \
        == [("applied", 3, 3), ("applied", 4, 4)]
    # its one name, in the ledger as in the catalog (the TPC-DS star's tables are recorded the same way)
    assert {r["table"] for r in status} == {f"{NAMESPACE}.orders"}
    assert set(_ledger(lake_env)["table_name"].to_pylist()) == {f"{NAMESPACE}.orders"}

    code, out = lake("query", f"SELECT order_id, amount FROM {NAMESPACE}.orders ORDER BY order_id",
                     "--format", "json")
    assert code == 0 and [(r["order_id"], r["amount"]) for r in json.loads(out)] == [(1, 11.0), (3, 7.25), (4, 1.0)], out
    code, out = lake("history", f"{NAMESPACE}.orders", "--format", "json")
    assert code == 0 and [(r["snapshot_id"], r["rows_applied"]) for r in json.loads(out)][:2] == [
        (second.snapshot_id, 3), (first, 3)], out
    # by its declaration's name too, as `lake put` and `lake status` call it
    code, out = lake("changes", "orders", "--from-version", str(second.snapshot_id), "--format", "json")
    assert code == 0, out
    assert sorted((c["_change_type"], c["order_id"]) for c in json.loads(out)) == [
        ("delete", 2), ("insert", 4), ("update_postimage", 1), ("update_preimage", 1)]
    code, out = lake("maintain")  # compacts it, expires snapshots, removes orphans: its rows stay
    assert code == 0, out
    compacted = _iceberg(lake_env)
    assert {r["order_id"]: (r["customer"], r["amount"]) for r in compacted.scan().to_arrow().to_pylist()} == rows

    code, out = lake("restore", "orders", "--version", str(first))  # undo the CDC file
    assert code == 0, out
    restored = _iceberg(lake_env)
    assert restored.current_snapshot().snapshot_id == first
    assert {r["order_id"] for r in restored.scan().to_arrow().to_pylist()} == {1, 2, 3}
    code, out = lake("status", "--format", "json")
    assert [r["status"] for r in json.loads(out) if r["file"].startswith("raw/orders/")] == ["applied", "reverted"]
    current = DeltaTable(lake_env.uri("curated/orders_history"), storage_options=options).to_pyarrow_table()
    assert sorted(r["order_id"] for r in current.to_pylist() if r["is_current"]) == [1, 2, 3]
    code, out = lake("run", "--reapply")  # and apply it again
    assert code == 0 and "check orders_history: matches_table: passed" in out and "failed" not in out, out
    again = _iceberg(lake_env)
    assert again.current_snapshot().parent_snapshot_id == first
    assert {r["order_id"]: (r["customer"], r["amount"]) for r in again.scan().to_arrow().to_pylist()} == rows


def test_entries_recorded_under_an_iceberg_tables_bare_name_are_its_own(lake_env: LakeStorage, tables_dir: Path,
                                                                        tmp_path: Path) -> None:
    """Until a declared Iceberg table's one name was its catalog identifier, its runs recorded the
    ledger under its declaration's name (`orders`). The ledger is never rewritten: those entries
    are read as `shop.orders`'s, so what they applied stays applied and no run takes it in again."""
    sample = tmp_path / "orders.csv"
    sample.write_text(SAMPLE)
    assert lake("table", "add", "orders", "--sample", str(sample), "--format", "iceberg")[0] == 0
    path = tables_dir / "orders.yaml"
    path.write_text(path.read_text().replace("group: orders", f"group: {NAMESPACE}"))
    assert lake("put", str(sample), "--to", "orders:snapshot")[0] == 0
    [landed] = lake_env.list_objects("raw/orders/")
    Ledger(lake_env).record([LedgerEntry(
        "orders", landed["Key"], landed["ETag"].strip('"'), landed["Size"], "fullload", APPLIED, 3, 3, 0, 0, 1,
        "an-earlier-release", dt.datetime.now(dt.timezone.utc))])

    code, out = lake("status", "--format", "json", "--table", "orders")
    assert code == 0 and [(r["table"], r["status"], r["applied"]) for r in json.loads(out)] == [
        (f"{NAMESPACE}.orders", "applied", 3)], out
    code, out = lake("run")
    assert code == 0 and "orders: nothing pending" in out, out
    assert _ledger(lake_env)["table_name"].to_pylist() == ["orders"]  # as recorded
