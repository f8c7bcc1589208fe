"""Failed commands end in one clear line and a documented exit code, never a traceback;
`lake query` is read-only over the lake's tables; settings and credentials are validated."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lake_assets.cli import app
from lake_assets.cli.sql_guard import tables_in
from lake_assets.core.errors import UsageError
from lake_assets.core.formats.delta import open_table
from lake_assets_tests.helpers.insurance_tables import INSURANCE
from lake_assets.resources.embedded_s3 import free_port
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.conftest import DATA

LAKE = str(Path(sys.executable).with_name("lake"))
runner = CliRunner()


def lake_command(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([LAKE, *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def command_env(storage: LakeStorage) -> dict[str, str]:
    """Environment of an installed `lake` command on the test's bucket of the session's server."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "LAKE_S3_ENDPOINT", "DAGSTER_HOME")}
    return {**env, "LAKE_HOME": storage.home, "LAKE_S3_BUCKET": storage.bucket}


# --- lake run ------------------------------------------------------------------------

def test_a_failed_run_is_one_line_and_exit_1(storage: LakeStorage, command_env: dict[str, str]) -> None:
    storage.put_bytes("raw/fullload/full-load.csv", (DATA / "fullload" / "full-load.csv").read_bytes())
    no_engine = {**command_env, "LAKE_ENGINE": "local", "LAKE_SPARK_JARS": "/nonexistent", "LAKE_SPARK_PACKAGES": ""}
    result = lake_command("run", env=no_engine)  # the step fails: the local JVM engine's jars directory is not there
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output and "CheckError" not in output
    assert "run failed:" in result.stderr and "LAKE_SPARK_JARS=/nonexistent is not a directory" in result.stderr
    assert len(output.strip().splitlines()) <= 6, output


def test_a_run_that_refuses_a_whole_file_exits_3(storage: LakeStorage, command_env: dict[str, str]) -> None:
    storage.put_bytes("raw/fullload/full-load.csv", (DATA / "fullload" / "full-load.csv").read_bytes())
    storage.put_bytes("raw/cdcload/20240401-090000000.csv", b"not,the,header\n1,2,3\n")
    result = lake_command("run", env=command_env)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "refused: raw/cdcload/20240401-090000000.csv" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.integration
def test_first_commands_at_once_share_one_instance_and_one_server(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "LAKE_S3_ENDPOINT", "DAGSTER_HOME")}
    env.update({"LAKE_HOME": str(tmp_path / "home"), "LAKE_S3_PORT": str(free_port())})
    runs = [subprocess.Popen([LAKE, "run"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(3)]
    results = [(run.wait(timeout=300), *run.communicate()) for run in runs]
    for code, out, err in results:
        assert code == 0, out + err
        assert "already exists" not in err and "Traceback" not in err


# --- settings and credentials ----------------------------------------------------------

@pytest.mark.parametrize(("name", "value", "message"), [
    ("LAKE_S3_PORT", "abc", "LAKE_S3_PORT='abc' is not a whole number"),
    ("LAKE_S3_PORT", "70000", "LAKE_S3_PORT=70000 is not a TCP port"),
    ("LAKE_SENSOR_INTERVAL_SECONDS", "0", "must be at least 0.1"),
    ("LAKE_ENGINE", "sial", "LAKE_ENGINE='sial' is not one of sail, remote, local"),
])
@pytest.mark.integration
def test_malformed_settings_are_a_usage_error(tmp_path: Path, name: str, value: str, message: str) -> None:
    env = {**os.environ, "LAKE_HOME": str(tmp_path), name: value}
    result = lake_command("status", env=env, timeout=60)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.integration
def test_an_endpoint_without_credentials_is_a_usage_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    env.update({"LAKE_HOME": str(tmp_path), "LAKE_S3_ENDPOINT": f"http://127.0.0.1:{free_port()}"})
    result = lake_command("status", env=env, timeout=60)
    assert result.returncode == 2 and "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not" in result.stderr
    assert "Traceback" not in result.stderr
    result = lake_command("status", env={**env, "AWS_ACCESS_KEY_ID": "only-the-key"}, timeout=60)
    assert result.returncode == 2 and "set AWS_SECRET_ACCESS_KEY too" in result.stderr


@pytest.mark.integration
def test_credentials_are_generated_per_lake_owner_only(tmp_path: Path) -> None:
    code = ("import sys; from pathlib import Path; from lake_assets.settings import embedded_credentials as c; "
            "k = c(Path(sys.argv[1])); print(k.access_key_id, k.secret_access_key)")
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    makers = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "a")], env=env, stdout=subprocess.PIPE,
                               text=True) for _ in range(4)]
    pairs = {maker.communicate()[0] for maker in makers}
    assert len(pairs) == 1  # four first users at once agree on one pair
    key, secret = pairs.pop().split()
    assert secret != "lake-local-secret" and len(secret) >= 32 and key != "lake"
    stored = tmp_path / "a" / "s3-credentials.json"
    assert stored.stat().st_mode & 0o777 == 0o600
    assert json.loads(stored.read_text()) == {"access_key_id": key, "secret_access_key": secret}
    other = subprocess.run([sys.executable, "-c", code, str(tmp_path / "b")], env=env, capture_output=True, text=True)
    assert other.stdout.split()[1] != secret  # another lake, another secret


@pytest.mark.integration
def test_a_lake_uses_the_keys_the_user_sets(tmp_path: Path) -> None:
    env = {**os.environ, "LAKE_HOME": str(tmp_path), "LAKE_S3_PORT": str(free_port()),
           "AWS_ACCESS_KEY_ID": "mine", "AWS_SECRET_ACCESS_KEY": "my-own-secret-value"}
    env.pop("LAKE_S3_ENDPOINT", None)
    result = lake_command("status", "--format", "json", env=env, timeout=120)
    assert result.returncode == 0 and json.loads(result.stdout) == [], result.stderr
    assert not (tmp_path / "s3-credentials.json").exists()


# --- lake query ----------------------------------------------------------------------

@pytest.mark.parametrize("sql", [
    "DELETE FROM delta.`s3://lake/curated/insurance` WHERE policy_id > 0",
    "SELECT * FROM text.`/etc/hostname`",
    "SELECT * FROM insurance WHERE policy_id IN (SELECT 1 FROM csv.`/etc/passwd`)",
    "INSERT INTO insurance SELECT * FROM insurance",
    "UPDATE insurance SET insured_value = 0",
    "MERGE INTO insurance t USING insurance s ON t.policy_id = s.policy_id WHEN MATCHED THEN DELETE",
    "DROP TABLE insurance",
    "CREATE TABLE x AS SELECT * FROM insurance",
    "SELECT * FROM insurance; DELETE FROM insurance",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM range(10)",
    "SELECT reflect('java.lang.System', 'exit', 1)",
    "SET spark.sql.warehouse.dir=/tmp",
    "SELECT * FROM some_other_table",
])
def test_query_refuses_anything_but_reading_lake_tables(sql: str) -> None:
    with pytest.raises(UsageError):
        tables_in(sql)


def test_query_finds_tables_through_ctes_subqueries_and_set_operations() -> None:
    assert sorted(tables_in("WITH recent AS (SELECT * FROM insurance) SELECT * FROM recent JOIN lake_ledger l "
                            "ON 1 = 1 UNION ALL SELECT * FROM INSURANCE_QUARANTINE")) == \
        ["insurance", "insurance_quarantine", "lake_ledger"]
    assert tables_in("SELECT 1 AS one") == [] and tables_in("VALUES (1, 2)") == []
    assert sorted(tables_in("SELECT count(*) FROM tpcds.web_sales ws JOIN insurance i ON 1 = 1")) == \
        ["insurance", "tpcds.web_sales"]


def test_query_cannot_delete_or_read_files_end_to_end(storage: LakeStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKE_HOME", storage.home)
    monkeypatch.setenv("LAKE_S3_BUCKET", storage.bucket)
    storage.put_bytes("raw/fullload/full-load.csv", (DATA / "fullload" / "full-load.csv").read_bytes())
    assert runner.invoke(app, ["run"]).exit_code == 0
    version = open_table(storage, INSURANCE).version()
    result = runner.invoke(app, ["query", f"DELETE FROM delta.`{INSURANCE.uri(storage)}`"])
    assert result.exit_code == 2 and "read-only" in result.output
    result = runner.invoke(app, ["query", "SELECT * FROM text.`/etc/hostname`"])
    assert result.exit_code == 2 and "lake's tables" in result.output
    assert open_table(storage, INSURANCE).version() == version
    result = runner.invoke(app, ["query", "SELECT count(*) AS n FROM insurance", "--format", "json"])
    assert result.exit_code == 0 and json.loads(result.output) == [{"n": 25}]
