"""`lake backfill` of a declared table: its newest snapshots loaded again in one run of its job,
each as of its own stamp, on the real embedded S3 and Sail; delta-rs deletes a row from outside
the lake (the damage a backfill repairs) and reads the table back."""

import json
from pathlib import Path

from deltalake import DeltaTable

from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.cli import lake

DECLARATION = """name: sales
group: shop
keys: [id]
columns:
  - {name: id, type: BIGINT, nullable: false}
  - {name: day, type: DATE}
  - {name: amount, type: BIGINT}
sources:
  - {prefix: raw/sales/days/, kind: snapshot, partition: day}
  - {prefix: raw/sales/cdc/, kind: cdc}
"""


def _rows(storage: LakeStorage) -> dict[int, int]:
    table = DeltaTable(storage.uri("curated/sales"), storage_options=storage.delta_storage_options())
    return {r["id"]: r["amount"] for r in table.to_pyarrow_table().to_pylist()}


def test_backfill_loads_partitions_again_and_keeps_newer_changes(lake_env: LakeStorage, tables_dir: Path,
                                                                 tmp_path: Path) -> None:
    tables_dir.mkdir()
    (tables_dir / "sales.yaml").write_text(DECLARATION)
    for day, rows in (("2024-04-01", "1,2024-04-01,10\n2,2024-04-01,20\n"), ("2024-04-02", "3,2024-04-02,30\n")):
        (tmp_path / f"{day}.csv").write_text(rows)
        code, out = lake("put", str(tmp_path / f"{day}.csv"), "--to", "sales:snapshot", "--as", f"day={day}/part-0.csv")
        assert code == 0, out
    correction = tmp_path / "20240405-000000000.csv"
    correction.write_text("U,1,2024-04-01,11\n")
    assert lake("put", str(correction), "--to", "sales:cdc")[0] == 0
    code, out = lake("run")
    assert code == 0, out
    assert _rows(lake_env) == {1: 11, 2: 20, 3: 30}

    DeltaTable(lake_env.uri("curated/sales"), storage_options=lake_env.delta_storage_options()).delete("id = 2")
    code, out = lake("backfill", "sales", "--partition", "2024-04-01")
    assert code == 0, out
    assert "sales: loading 1 object(s) again" in out and "day=2024-04-01/part-0.csv" in out, out
    assert _rows(lake_env) == {1: 11, 2: 20, 3: 30}  # key 2 back, key 1's correction kept
    # a range, open at one end: the second day only
    code, out = lake("backfill", "sales", "--from", "2024-04-02")
    assert code == 0 and "day=2024-04-02/part-0.csv" in out and "2024-04-01" not in out.split("again")[1], out
    assert "(unchanged)" in out and "0 inserted, 0 updated, 0 deleted, 1 superseded" in out, out  # it lost nothing
    code, out = lake("status", "--format", "json")
    days = {r["file"]: r["status"] for r in json.loads(out) if r["file"].startswith("raw/sales/days/")}
    assert code == 0 and set(days.values()) == {"applied"} and len(days) == 2, out

    for args, message in (
            (["--partition", "2024-05-09"], "no applied snapshot of day=2024-05-09 (partitions with one: "
                                            "2024-04-01, 2024-04-02)"),
            (["--from", "2024-04-02", "--to", "2024-04-01"], "--from 2024-04-02 is after --to 2024-04-01"),
            (["--partition", "April"], "--partition: 'April' is not a DATE value of day"),
            (["--partition", "2024-04-01", "--from", "2024-04-01"], "use one or the other"),
            (["--from", "2030-01-01"], "no applied snapshot to load again in the partitions asked for")):
        code, out = lake("backfill", "sales", *args)
        assert code != 0 and message in out and len(out.strip().splitlines()) == 1, (args, out)
    code, out = lake("backfill", "tpcds.web_sales")
    assert code != 0 and "give the days to load again with --from and --to" in out, out
    code, out = lake("backfill", "tpcds.item")
    assert code == 2 and "tpcds.item is neither tpcds.web_sales nor a declared table (declared: " in out, out
