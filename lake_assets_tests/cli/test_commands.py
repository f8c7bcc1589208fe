"""`lake` commands against the session's real S3 server and Sail engine."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lake_assets.resources.embedded_s3 import free_port
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.conftest import DATA
from lake_assets_tests.helpers.cli import lake


def test_put_run_query_history_status(lake_env: LakeStorage) -> None:
    code, out = lake("put", str(DATA / "fullload" / "full-load.csv"), "--to", "fullload")
    assert code == 0 and "raw/fullload/full-load.csv" in out
    code, out = lake("status", "--format", "json")
    assert code == 0 and json.loads(out)[0]["status"] == "pending"

    code, out = lake("run")
    assert code == 0, out
    assert "rows 0 -> 25" in out and "FAILED" not in out

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
    assert code == 2 and "--to must be one of" in out
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
