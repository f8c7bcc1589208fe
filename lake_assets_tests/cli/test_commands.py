"""`lake` commands against the session's real S3 server and Sail engine."""

import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from lake_assets.core.ledger import Ledger
from lake_assets_tests.helpers.insurance_tables import TABLE
from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.embedded_s3 import free_port
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.conftest import DATA
from lake_assets_tests.helpers.cli import lake
from lake_assets_tests.helpers.tpcds import day_line, land_small_dimensions
from lake_assets.tpcds.schema import RAW, TpcdsTable, date_sk
from lake_assets.cli.session import dagster_instance
from lake_assets.runs import REPOSITORY_TAG, TABLE_TAG
from lake_assets.settings import LakeSettings


def test_put_run_query_history_status(lake_env: LakeStorage) -> None:
    code, out = lake("put", str(DATA / "fullload" / "full-load.csv"), "--to", "fullload")
    assert code == 0 and "raw/fullload/full-load.csv" in out
    code, out = lake("status", "--format", "json")
    assert code == 0 and json.loads(out)[0]["status"] == "pending"

    instance = dagster_instance(LakeSettings.from_env())  # the session's: other tests' runs are there too
    earlier = {r.run_id for r in instance.get_runs(dg.RunsFilter(job_name="apply_insurance"))}
    code, out = lake("run")
    assert code == 0, out
    assert "rows 0 -> 25" in out and "FAILED" not in out
    runs = [r for r in instance.get_runs(dg.RunsFilter(job_name="apply_insurance")) if r.run_id not in earlier]
    assert [(r.tags.get(TABLE_TAG), r.tags.get("lake/launched_by")) for r in runs] == [("insurance", "lake run")]
    # the job's page in the UI lists the runs of its code location: this one too (test_dagster_ui opens it)
    assert runs[0].tags.get(REPOSITORY_TAG) == "__repository__@lake"

    for file in sorted((DATA / "cdcload").glob("*.csv")):
        assert lake("put", str(file), "--to", "cdcload")[0] == 0
    assert lake("run")[0] == 0

    code, out = lake("query", "SELECT policy_id, insured_value FROM insurance WHERE policy_id = 100463", "--format", "csv")
    assert code == 0 and out.splitlines() == ["policy_id,insured_value", "100463,1000000"]
    code, out = lake("query", "SELECT insured_value FROM insurance WHERE policy_id = 100463", "--version", "0",
                     "--format", "json")
    assert code == 0 and json.loads(out) == [{"insured_value": 15480000}]
    code, out = lake("query", "SELECT count(*) AS n FROM insurance_quarantine", "--format", "json")
    assert json.loads(out) == [{"n": 1}]

    code, out = lake("history", "insurance", "--format", "csv")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("version,") and [line.split(",")[0] for line in lines[1:]] == ["1", "0"]

    code, out = lake("status", "--format", "json")
    statuses = {row["file"]: row for row in json.loads(out)}
    assert statuses["raw/cdcload/20240402-090000000.csv"]["quarantined"] == 1
    assert {row["status"] for row in statuses.values()} == {"applied"}


def test_user_mistakes_get_a_message_not_a_traceback(lake_env: LakeStorage, tmp_path: Path) -> None:
    code, out = lake("put", str(tmp_path / "missing.csv"), "--to", "cdcload")
    assert code == 2 and "no such file" in out
    code, out = lake("put", str(DATA / "fullload" / "full-load.csv"), "--to", "elsewhere")
    assert code == 2 and "--to must name a table's raw zone" in out and "'elsewhere'" in out
    code, out = lake("history", "no_such_table")
    assert code == 2 and "unknown table 'no_such_table'" in out
    code, out = lake("query", "SELECT * FROM insurance")
    assert code == 2 and "does not exist yet" in out
    code, out = lake("query", "SELECT * FROM insurance JOIN insurance_quarantine", "--version", "1")
    assert code == 2 and "exactly one table" in out


@pytest.mark.integration
def test_s3_down_is_a_clear_error_from_the_installed_command(tmp_path: Path) -> None:
    env = {**os.environ, "LAKE_HOME": str(tmp_path), "LAKE_S3_ENDPOINT": f"http://127.0.0.1:{free_port()}",
           "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "not-shown-anywhere"}
    result = subprocess.run([str(Path(sys.executable).with_name("lake")), "status"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "S3 at http://127.0.0.1:" in result.stderr and "Traceback" not in result.stderr + result.stdout
    assert "not-shown-anywhere" not in result.stderr + result.stdout


def test_status_lists_non_csv_objects_as_ignored(lake_env: LakeStorage) -> None:
    lake_env.put_bytes("raw/cdcload/_SUCCESS", b"")
    lake_env.put_bytes("raw/cdcload/20240401-090000000.csv", b"D,1,,,,,,,,\n")
    code, out = lake("status", "--format", "json")
    assert code == 0, out
    assert {row["file"]: row["status"] for row in json.loads(out)} == {
        "raw/cdcload/20240401-090000000.csv": "pending", "raw/cdcload/_SUCCESS": "ignored"}


def test_put_warns_at_once_about_a_file_the_pipeline_will_refuse_or_ignore(lake_env: LakeStorage,
                                                                           tmp_path: Path) -> None:
    cdc = tmp_path / "cdc-load.csv"
    cdc.write_bytes((DATA / "cdcload" / "20240401-090000000.csv").read_bytes())
    code, out = lake("put", str(cdc), "--to", "cdcload")
    [warning] = [line for line in out.splitlines() if line.startswith("warning:")]
    assert code == 0 and "cdc-load.csv will be refused (no_sequence)" in warning
    assert re.search(r"--as 20[0-9]{6}-[0-9]{9}\.csv", warning) and "raw/cdcload/cdc-load.csv" in out
    code, out = lake("put", str(cdc), "--to", "cdcload", "--as", "2024/04/01/manual-fix.csv")  # dated by folders
    assert code == 0 and "warning" not in out and "raw/cdcload/2024/04/01/manual-fix.csv" in out
    code, out = lake("put", str(DATA / "fullload" / "full-load.csv"), "--to", "fullload")  # a snapshot needs no time
    assert code == 0 and "warning" not in out
    for name in ("full-load.csv.gz", "_SUCCESS"):
        code, out = lake("put", str(cdc), "--to", "fullload", "--as", name)
        assert code == 0 and f"warning: {name} will be ignored" in out
    assert "--as full-load.csv" in lake("put", str(cdc), "--to", "fullload", "--as", "full-load.csv.GZ")[1]
    code, out = lake("put", str(cdc), "--to", "cdcload", "--as", "CDC_TXN-20240401090000000.csv")
    assert code == 0 and "will be refused (dms_layout)" in out and "PreserveTransactions" in out
    code, out = lake("put", str(cdc), "--to", "cdcload", "--as", "../elsewhere.csv")
    assert code == 2 and "--as must be a file name below the zone" in out
    assert lake_env.list_objects("elsewhere.csv") == []


def test_rm_takes_back_what_was_not_applied(lake_env: LakeStorage, tmp_path: Path) -> None:
    cdc = tmp_path / "cdc-load.csv"
    cdc.write_bytes((DATA / "cdcload" / "20240401-090000000.csv").read_bytes())
    assert lake("put", str(cdc), "--to", "cdcload")[0] == 0
    assert lake("put", str(cdc), "--to", "cdcload", "--as", "20240401-090000000.csv")[0] == 0
    assert lake("run")[0] == 3  # cdc-load.csv refused whole, the other applied
    code, out = lake("rm", "raw/cdcload/20240401-090000000.csv")
    assert code == 1 and "applied, its rows are in the table and stay there" in out and "lake restore" in out
    code, out = lake("rm", f"s3://{lake_env.bucket}/raw/cdcload/cdc-load.csv")
    assert code == 0 and "removed s3://" in out and "stay" not in out
    statuses = {row["file"]: row["status"] for row in json.loads(lake("status", "--format", "json")[1])}
    assert statuses == {"raw/cdcload/20240401-090000000.csv": "applied"}  # what the raw zone holds, truly
    rejected = [e for e in Ledger(lake_env).entries(TABLE).to_pylist() if e["source_file"].endswith("cdc-load.csv")]
    assert [e["status"] for e in rejected] == ["rejected"]  # its history is kept
    rows = json.loads(lake("query", "SELECT count(*) AS n FROM insurance", "--format", "json")[1])
    code, out = lake("rm", "--force", "raw/cdcload/20240401-090000000.csv")
    assert code == 0 and "its rows stay in the table" in out
    assert json.loads(lake("query", "SELECT count(*) AS n FROM insurance", "--format", "json")[1]) == rows
    assert rows[0]["n"] > 0
    assert lake_env.list_objects("raw/") == []
    code, out = lake("rm", "raw/cdcload/cdc-load.csv")
    assert code == 1 and "no such raw file: raw/cdcload/cdc-load.csv" in out
    code, out = lake("rm", "raw/tpcds/store_sales/x.csv")
    assert code == 2 and "is not a declared table's raw file" in out


@pytest.mark.e2e
def test_put_and_rm_serve_the_tpcds_stars_zones_by_their_loaders_rules(lake_env: LakeStorage, catalog: LakeCatalog,
                                                                       tmp_path: Path) -> None:
    """The star's tables are declared too (lake_assets/tables/tpcds/): `lake put --to web_sales:snapshot`
    lands a day's object where the star's loader reads it, warning at once by the loader's rules (one
    object per day folder, in its sold date's folder); a correction needs no DMS time (its loader
    sequences it by arrival); a dimension's export goes to its zone. `lake rm` takes back what is pending."""
    days = [dt.date(2000, 1, 1), dt.date(2000, 1, 2)]
    land_small_dimensions(lake_env, days)
    day = tmp_path / "day.dat"
    day.write_text("".join(f"{day_line(days[0], item, 1)}\n" for item in range(1, 4)))
    folder = f"ws_sold_date_sk={date_sk(days[0])}"
    code, out = lake("put", str(day), "--to", "web_sales:snapshot", "--as", f"{folder}/part-00000.dat")
    assert code == 0 and "warning" not in out and f"raw/tpcds/web_sales/{folder}/part-00000.dat" in out, out
    code, out = lake("put", str(day), "--to", "web_sales:snapshot", "--as", f"{folder}/part-00001.dat")
    assert code == 0 and "holds 2 objects, the contract allows one per day" in out, out
    code, out = lake("put", str(day), "--to", "web_sales:snapshot")
    assert code == 0 and "not in a ws_sold_date_sk=<the sold date's key> folder" in out, out
    code, out = lake("rm", f"raw/tpcds/web_sales/{folder}/part-00001.dat", "raw/tpcds/web_sales/day.dat")
    assert code == 0 and out.count("removed") == 2, out
    correction = tmp_path / "fix.dat"
    correction.write_text(f"U|{day_line(days[0], 1, 1, quantity=7)}\n")
    code, out = lake("put", str(correction), "--to", "web_sales:cdc")
    assert code == 0 and "warning" not in out and "raw/tpcds/web_sales_cdc/fix.dat" in out, out
    export = tmp_path / "item.dat"
    export.write_bytes(lake_env.get_bytes(RAW.dimension_key(TpcdsTable.ITEM))[0])
    code, out = lake("put", str(export), "--to", "item:cdc", "--as", "item-2.dat")
    assert code == 0 and "warning" not in out, out
    code, out = lake("put", str(export), "--to", "item:cdc", "--as", "_SUCCESS")
    assert code == 0 and "_SUCCESS will be ignored, never applied: only *.dat files are data" in out, out
    statuses = {row["file"]: (row["status"], row["detail"]) for row in json.loads(lake("status", "--format", "json")[1])}
    assert statuses["raw/tpcds/item/_SUCCESS"] == ("ignored", "not a .dat file: never applied")
    assert statuses["raw/tpcds/item/item-2.dat"] == ("pending", None)

    assert lake("run")[0] == 0
    rows = json.loads(lake("query", "SELECT ws_item_sk, ws_quantity FROM tpcds.web_sales ORDER BY 1",
                           "--format", "json")[1])
    assert rows == [{"ws_item_sk": 1, "ws_quantity": 7}, {"ws_item_sk": 2, "ws_quantity": 1},
                    {"ws_item_sk": 3, "ws_quantity": 1}]  # the day, then its correction by arrival
    code, out = lake("rm", f"raw/tpcds/web_sales/{folder}/part-00000.dat")
    assert code == 1 and "applied, its rows are in the table and stay there" in out, out

    # a dimension's export under a name of its own, alone: `lake run` finds it, as the change core does
    before = json.loads(lake("history", "tpcds.item", "--format", "json")[1])[0]["snapshot_id"]
    lines = export.read_text().splitlines()
    export.write_text("\n".join([lines[0].replace(lines[0].split("|")[4], "a new description", 1), *lines[1:]]) + "\n")
    assert lake("put", str(export), "--to", "item:cdc", "--as", "item-3.dat")[0] == 0
    code, out = lake("run")
    assert code == 0 and "applied: raw/tpcds/item/item-3.dat -> tpcds.item snapshot" in out, out
    described = "SELECT i_item_desc FROM tpcds.item WHERE i_item_sk = 1"
    assert json.loads(lake("query", described, "--format", "json")[1]) == [{"i_item_desc": "a new description"}]
    assert lake("restore", "tpcds.item", "--version", str(before))[0] == 0
    assert json.loads(lake("query", described, "--format", "json")[1]) != [{"i_item_desc": "a new description"}]
    code, out = lake("run", "--reapply")
    assert code == 0 and "applied: raw/tpcds/item/item-3.dat -> tpcds.item snapshot" in out, out
    assert json.loads(lake("query", described, "--format", "json")[1]) == [{"i_item_desc": "a new description"}]
