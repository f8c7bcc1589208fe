"""The seed's accidental overwrite, then `lake restore`, as a user runs it.

A one-row full load overwrites `insurance` by mistake (held by the shrink guard, then
approved); a CDC batch lands after it. `lake restore insurance --version N` brings the
rows back as a new version, `lake status` shows both files as reverted, a plain `lake run`
leaves them alone, and `lake run --reapply` applies them again, giving what the pipeline
gave before the restore and what a small model of the files says.
"""

import datetime as dt
import json

import dagster as dg

from lake_assets.cli.session import dagster_instance
from lake_assets.core.formats.delta import current_version, open_table, to_arrow
from lake_assets.core.ledger import Ledger
from lake_assets_tests.helpers.insurance_tables import INSURANCE, INSURANCE_QUARANTINE, INSURANCE_TOMBSTONES
from lake_assets_tests.helpers.insurance_tables import DATA_COLUMN_NAMES
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings
from lake_assets_tests.helpers.cli import lake
from lake_assets_tests.helpers.raw_status import assert_every_row_accounted

HEADER = ",".join(DATA_COLUMN_NAMES)
FULL, MISTAKE = "raw/fullload/LOAD00000001.csv", "raw/fullload/oops/overwrite.csv"
CDC_BEFORE, CDC_AFTER = "raw/cdcload/20240101-090000000.csv", "raw/cdcload/20240301-090000000.csv"


def row(key: int, value: int) -> str:
    return f"{key},2024-01-31,Urban,CA,West,{value},Retail,N,Y"


def rows(storage: LakeStorage, version: int | None = None) -> dict[int, int]:
    """policy_id -> insured_value, read by delta-rs (an independent reader)."""
    table = to_arrow(open_table(storage, INSURANCE, version)).select(["policy_id", "insured_value"]).to_pylist()
    return {r["policy_id"]: r["insured_value"] for r in table}


def quarantined(storage: LakeStorage) -> list[str]:
    """The source file of every quarantined row (delta-rs)."""
    return sorted(to_arrow(open_table(storage, INSURANCE_QUARANTINE)).column("source_file").to_pylist())


def status(storage: LakeStorage) -> dict[str, dict]:
    code, out = lake("status", "--format", "json")
    assert code == 0, out
    return {r["file"]: r for r in json.loads(out)}


def test_accidental_overwrite_restore_and_reapply(lake_env: LakeStorage) -> None:
    storage = lake_env
    storage.put_bytes(FULL, "\n".join([HEADER, *(row(k, 100 * k) for k in range(1, 11)), ""]).encode())
    assert lake("run")[0] == 0
    storage.put_bytes(CDC_BEFORE, f"U,{row(1, 111)}\nD,{row(2, 0)}\n".encode())
    assert lake("run")[0] == 0
    good = current_version(storage, INSURANCE)
    before = rows(storage)
    assert len(before) == 9 and before[1] == 111

    # the mistake: a one-row "full load" (the guard holds it; someone approves it anyway)
    storage.put_bytes(MISTAKE, f"{HEADER}\n{row(1, 999)}\n".encode())
    assert lake("run")[0] == 0
    assert status(storage)[MISTAKE]["status"] == "held"
    code, out = lake("approve", MISTAKE)
    assert code == 0, out
    assert rows(storage) == {1: 999}
    bad_flag = f"I,{row(12, 1200)}".replace(",N,Y", ",Q,Y")  # quarantined: bad_flag
    storage.put_bytes(CDC_AFTER, f"I,{row(11, 1100)}\nU,{row(3, 333)}\n{bad_flag}\n".encode())
    assert lake("run")[0] == 0
    wrong = current_version(storage, INSURANCE)
    overwritten = rows(storage)
    assert overwritten == {1: 999, 3: 333, 11: 1100}  # the model: the snapshot, then the later batch
    assert quarantined(storage) == [CDC_AFTER]
    tombstones_before = to_arrow(open_table(storage, INSURANCE_TOMBSTONES)).to_pylist()
    assert {t["policy_id"] for t in tombstones_before if t["source_file"] == MISTAKE} == {2, 3, 4, 5, 6, 7, 8, 9, 10}

    code, out = lake("restore", "insurance", "--version", str(good))
    assert code == 0, out
    restored = out
    assert f"restored version {good} as version {wrong + 1}" in out and "rows 3 -> 9" in out
    assert f"reverted {MISTAKE}" in out and f"reverted {CDC_AFTER}" in out
    assert current_version(storage, INSURANCE) == wrong + 1  # a new version: history keeps the mistake
    assert rows(storage) == before
    code, out = lake("query", "SELECT count(*) AS n FROM insurance", "--format", "json")
    assert json.loads(out) == [{"n": 9}]  # the engine reads the restored table too
    code, out = lake("history", "insurance", "--format", "json")
    newest = json.loads(out)[0]
    assert newest["operation"] == "RESTORE"
    assert newest["files_added"] >= 1 and newest["files_removed"] >= 1  # delta-rs names them in the singular
    # the mistake's tombstones are gone; c1's delete of key 2 (which the mistake had replaced) is back
    tombstones = to_arrow(open_table(storage, INSURANCE_TOMBSTONES)).to_pylist()
    assert [(t["policy_id"], t["source_file"]) for t in tombstones] == [(2, CDC_BEFORE)]
    # the quarantine keeps every refused line, of a reverted file too (what is wrong with it)
    assert quarantined(storage) == [CDC_AFTER] and "quarantined" not in restored

    files = status(storage)
    for file in (MISTAKE, CDC_AFTER):
        assert files[file]["status"] == "reverted", files[file]
        assert files[file]["detail"].startswith(f"reverted by restore to version {good}")
        assert "lake run --reapply" in files[file]["detail"]
    assert files[FULL]["status"] == files[CDC_BEFORE]["status"] == "applied"

    # the restore is a materialization of `insurance` in Dagster, with what it did
    instance = dagster_instance(LakeSettings.from_env())
    event = instance.get_latest_materialization_event(dg.AssetKey("insurance"))
    meta = {k: v.value for k, v in event.asset_materialization.metadata.items()}
    assert meta["restored_from_version"] == good and meta["rows_before"] == 3 and meta["rows_after"] == 9
    assert sorted(meta["reverted_files"]) == sorted([MISTAKE, CDC_AFTER])

    code, out = lake("run")  # a plain run leaves reverted files alone
    assert code == 0, out
    assert rows(storage) == before and current_version(storage, INSURANCE) == wrong + 1

    code, out = lake("run", "--reapply")
    assert code == 0, out
    assert rows(storage) == overwritten  # the model's result, as before the restore (no guard again)
    assert quarantined(storage) == [CDC_AFTER]  # the reapplication quarantines it once, not twice
    files = status(storage)
    assert files[MISTAKE]["status"] == files[CDC_AFTER]["status"] == "applied"
    latest = {e["source_file"]: e for e in Ledger(storage).entries("insurance").to_pylist()}
    assert latest[MISTAKE]["table_version"] == wrong + 2


def test_restore_as_of_and_refusals(lake_env: LakeStorage) -> None:
    storage = lake_env
    storage.put_bytes(FULL, "\n".join([HEADER, *(row(k, k) for k in range(1, 5)), ""]).encode())
    assert lake("run")[0] == 0
    first = open_table(storage, INSURANCE).history(1)[0]["timestamp"]
    storage.put_bytes(CDC_BEFORE, f"D,{row(1, 0)}\n".encode())
    assert lake("run")[0] == 0

    assert lake("restore", "insurance")[0] == 2
    code, out = lake("restore", "insurance", "--version", "7")
    assert code == 2 and "versions 0 to 1" in out
    code, out = lake("restore", "insurance", "--version", "1")
    assert code == 2 and "at version 1 already" in out
    code, out = lake("restore", "lake_ledger", "--version", "0")
    assert code == 2 and "cannot be restored" in out
    code, out = lake("restore", "insurance", "--as-of", "1999-01-01T00:00:00")
    assert code == 2 and "history starts at" in out

    as_of = dt.datetime.fromtimestamp(first / 1000 + 0.0005, dt.timezone.utc).isoformat()
    code, out = lake("restore", "insurance", "--as-of", as_of)
    assert code == 0, out
    assert rows(storage) == {k: k for k in range(1, 5)}
    assert status(storage)[CDC_BEFORE]["status"] == "reverted"
    # restoring forward again (to the version that had the delete) puts the file back
    code, out = lake("rollback", "insurance", "--snapshot", "1")  # the older name
    assert code == 0, out
    assert rows(storage) == {k: k for k in range(2, 5)}
    assert status(storage)[CDC_BEFORE]["status"] == "applied"
    assert LakeSettings.from_env().rules.time_travel_hours == 168


def test_a_restore_to_a_files_first_application_says_what_the_table_holds(lake_env: LakeStorage) -> None:
    """Restore back, apply a newer file, reapply, then restore to the version of a file's first
    application: `lake status` shows that application (its version, its rows applied and
    superseded), not the later one. Before, it kept the reapplication's version and split."""
    storage = lake_env
    storage.put_bytes(FULL, "\n".join([HEADER, *(row(k, k) for k in range(1, 4)), ""]).encode())
    assert lake("run")[0] == 0
    storage.put_bytes(CDC_BEFORE, f"U,{row(1, 10)}\nI,{row(4, 4)}\n".encode())
    assert lake("run")[0] == 0
    first = current_version(storage, INSURANCE)
    assert rows(storage) == {1: 10, 2: 2, 3: 3, 4: 4}
    assert lake("restore", "insurance", "--version", str(first - 1))[0] == 0  # CDC_BEFORE reverted
    storage.put_bytes(CDC_AFTER, f"U,{row(1, 20)}\n".encode())  # newer than CDC_BEFORE's change of key 1
    assert lake("run")[0] == 0
    code, out = lake("run", "--reapply")  # CDC_BEFORE again: its key-1 change is older than CDC_AFTER's now
    assert code == 0, out
    again = status(storage)[CDC_BEFORE]
    assert (again["version"], again["applied"], again["superseded"]) == (current_version(storage, INSURANCE), 1, 1)

    code, out = lake("restore", "insurance", "--version", str(first))
    assert code == 0, out
    assert rows(storage) == {1: 10, 2: 2, 3: 3, 4: 4}  # the table as CDC_BEFORE's first application left it
    files = status(storage)
    restored = files[CDC_BEFORE]
    assert (restored["status"], restored["version"], restored["applied"], restored["superseded"]) == \
        ("applied", first, 2, 0), restored
    assert files[CDC_AFTER]["status"] == "reverted"
    assert_every_row_accounted(files)
    code, out = lake("run")  # and the checks agree, the history's among them
    assert code == 0, out
