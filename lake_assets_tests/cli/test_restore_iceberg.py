"""`lake restore` of `tpcds.web_sales` keeps the ledger true, as for insurance.

Three days load, a fourth day loads, a correction file is applied. Restoring the snapshot
before the corrections run reverts the correction (pyiceberg and DuckDB read the old rows);
a plain `lake run` leaves it alone, `lake run --reapply` applies it again and the table is
what it was before the restore. Restoring the snapshot before the fourth day reverts the day
and the correction; restoring forward again reinstates both; restoring back once more, a plain
run re-loading a range of days around the reverted one leaves it out; reapplying loads the
day and then the correction over it, in sequence order, to the same rows.
Oracles: the table's own earlier snapshots read by pyiceberg, and the raw lines themselves.
"""

import json

import pytest

from lake_assets.core.tables import table
from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.schema import RAW
from lake_assets_tests.helpers.cli import lake
from lake_assets_tests.helpers.tpcds import fact_key, generated, land_dimensions, land_facts, sold_dates

WEB_SALES = "tpcds.web_sales"
CORRECTION = f"{RAW.corrections}20240101-000000000.dat"
ITEM, ORDER, QUANTITY = 3, 17, 18  # positions in a web_sales line
KEY = ("ws_item_sk", "ws_order_number")


def rows(catalog: LakeCatalog, snapshot: int | None = None) -> list[dict]:
    """web_sales as pyiceberg reads it (current, or at `snapshot`), in key order."""
    handle = catalog.pyiceberg().load_table(table(WEB_SALES).identifier)
    scan = handle.scan(snapshot_id=snapshot) if snapshot is not None else handle.scan()
    return sorted(scan.to_arrow().to_pylist(), key=lambda r: tuple(r[k] for k in KEY))


def _data(row: dict) -> dict:
    """A row's TPC-DS columns, without the lake's `_sequence`."""
    return {k: v for k, v in row.items() if not k.startswith("_")}


def current(catalog: LakeCatalog) -> int:
    return catalog.pyiceberg().load_table(table(WEB_SALES).identifier).current_snapshot().snapshot_id


def status() -> dict[str, dict]:
    code, out = lake("status", "--format", "json")
    assert code == 0, out
    return {r["file"]: r for r in json.loads(out)}


def duckdb_count() -> int:
    code, out = lake("query", "--engine", "duckdb", "SELECT count(*) AS n FROM tpcds.web_sales", "--format", "json")
    assert code == 0, out
    return json.loads(out)[0]["n"]


def restore(snapshot: int) -> str:
    code, out = lake("restore", WEB_SALES, "--version", str(snapshot))
    assert code == 0, out
    return out


@pytest.mark.e2e
def test_restore_reverts_and_reapply_loads_again(lake_env: LakeStorage, catalog: LakeCatalog) -> None:
    storage = lake_env
    oracle = generated(0.01)
    days = sold_dates(oracle)[:5]
    land_dimensions(storage, oracle)
    land_facts(storage, oracle, days[:3])
    assert lake("run")[0] == 0
    three_days = current(catalog)
    land_facts(storage, oracle, days[3:4])
    assert lake("run")[0] == 0
    four_days = current(catalog)
    at_four_days = rows(catalog)

    day = fact_key(days[3])
    first, second = storage.get_bytes(day)[0].decode().splitlines()[:2]
    changed = first.split("|")
    changed[QUANTITY] = "9999"
    storage.put_bytes(CORRECTION, f"U|{'|'.join(changed)}\nD|{second}\n".encode())
    assert lake("run")[0] == 0
    corrected = rows(catalog)
    updated = (int(changed[ITEM]), int(changed[ORDER]))
    deleted = (int(second.split("|")[ITEM]), int(second.split("|")[ORDER]))
    by_key = {tuple(r[k] for k in KEY): r for r in corrected}
    assert by_key[updated]["ws_quantity"] == 9999 and deleted not in by_key  # the raw lines' changes
    assert len(corrected) == len(at_four_days) - 1

    # restore to the snapshot before the corrections run: the correction is reverted
    out = restore(four_days)
    assert f"reverted {CORRECTION}" in out, out
    assert rows(catalog) == at_four_days and duckdb_count() == len(at_four_days)
    files = status()
    assert files[CORRECTION]["status"] == "reverted"
    assert files[CORRECTION]["detail"].startswith(f"reverted by restore to snapshot {four_days}")
    assert "lake run --reapply" in files[CORRECTION]["detail"]
    assert {files[fact_key(d)]["status"] for d in days[:4]} == {"applied"}

    code, out = lake("run")  # a plain run leaves the reverted file alone
    assert code == 0, out
    assert rows(catalog) == at_four_days and status()[CORRECTION]["status"] == "reverted"

    code, out = lake("run", "--reapply")
    assert code == 0, out
    assert rows(catalog) == corrected and duckdb_count() == len(corrected)
    assert status()[CORRECTION]["status"] == "applied"
    reapplied = current(catalog)

    # restore to before the fourth day: its object and the correction are reverted
    out = restore(three_days)
    assert f"reverted {day}" in out and f"reverted {CORRECTION}" in out, out
    assert rows(catalog) == rows(catalog, three_days) and len(rows(catalog)) < len(at_four_days)
    files = status()
    assert files[day]["status"] == files[CORRECTION]["status"] == "reverted"
    assert {files[fact_key(d)]["status"] for d in days[:3]} == {"applied"}

    # forward again: the snapshot contains both, so both are back
    out = restore(reapplied)
    assert f"back in the table: {day}" in out and f"back in the table: {CORRECTION}" in out, out
    assert rows(catalog) == corrected
    files = status()
    assert files[day]["status"] == files[CORRECTION]["status"] == "applied"
    assert files[day]["detail"].startswith(f"back in the table: restore to snapshot {reapplied}")

    # back once more; a plain run re-loading the range around the reverted day leaves it out
    restore(three_days)
    earlier = fact_key(days[2])
    dropped, *kept = storage.get_bytes(earlier)[0].decode().splitlines()
    storage.put_bytes(earlier, ("\n".join(kept) + "\n").encode())  # re-delivered, one line less
    land_facts(storage, oracle, days[4:5])
    code, out = lake("run")
    assert code == 0, out
    files = status()
    assert files[day]["status"] == files[CORRECTION]["status"] == "reverted"
    assert files[earlier]["status"] == files[fact_key(days[4])]["status"] == "applied"
    day_sk = int(first.split("|")[0])
    assert not [r for r in rows(catalog) if r["ws_sold_date_sk"] == day_sk]

    # then reapply: the day loads, then the correction over it
    code, out = lake("run", "--reapply")
    assert code == 0, out
    files = status()
    assert files[day]["status"] == files[CORRECTION]["status"] == "applied"
    new_day = {(int(f[ITEM]), int(f[ORDER])) for f in (line.split("|") for line in
                                                        storage.get_bytes(fact_key(days[4]))[0].decode().splitlines())}
    gone = (int(dropped.split("|")[ITEM]), int(dropped.split("|")[ORDER]))
    final = {tuple(r[k] for k in KEY): r for r in rows(catalog)}
    assert set(final) == (set(by_key) - {gone}) | new_day
    # the corrected rows, as before the restores (the re-delivered day's rows carry its newer sequence)
    assert all(_data(final[k]) == _data(by_key[k]) for k in set(by_key) - {gone})
    assert final[updated]["ws_quantity"] == 9999 and deleted not in final
    code, out = lake("run")
    assert code == 0 and "tpcds: nothing pending" in out, out
