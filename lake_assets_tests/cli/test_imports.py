"""Read-only commands import only what they use: no Dagster, and no PySpark unless they query.

Each command runs in a fresh interpreter (as `lake` does), against a lake holding a raw
file of each domain and a ledger entry, so the status and history paths do their real work.
How fast they are is measured in benchmarks/cli_latency.py, not here.
"""

import datetime as dt
import json
import os
import subprocess
import sys

import pytest

from lake_assets.core.ledger import APPLIED, Ledger, LedgerEntry
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.schema import RAW

#: Modules a read-only command must not import unless it needs them.
HEAVY = ("dagster", "pyspark", "pyiceberg", "duckdb", "sqlglot", "pandas")  # pandas: 0.6 s of `lake status`

RUN_COMMAND = """
import json, sys
from lake_assets.cli import app
args, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.argv = ["lake", *args]
try:
    app()
except SystemExit as exit:
    if exit.code:
        raise
print(json.dumps(sorted(name for name in heavy if name in sys.modules)))
"""


def imported(*args: str) -> list[str]:
    """Which of HEAVY `lake ARGS...` imported (its output's last line); fails if the command fails."""
    result = subprocess.run([sys.executable, "-c", RUN_COMMAND, json.dumps(args), json.dumps(HEAVY)],
                            env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@pytest.fixture
def lake_with_files(lake_env: LakeStorage) -> LakeStorage:
    lake_env.put_bytes("raw/fullload/LOAD00000001.csv", b"policy_id\n1\n")
    lake_env.put_bytes(RAW.dimension_key("item"), b"1|x|\n")
    Ledger(lake_env).record([LedgerEntry(
        "insurance", "raw/fullload/LOAD00000001.csv", "etag", 12, "fullload", APPLIED, 1, 1, 0, 0, 0, "run",
        dt.datetime.now(dt.timezone.utc))])
    return lake_env


def test_status_and_history_import_neither_dagster_nor_an_engine(lake_with_files: LakeStorage) -> None:
    assert imported("status") == []
    # a table without a feed: no feed counts to read, so no pyarrow.dataset (which imports pandas)
    assert imported("history", "lake_ledger") == []


def test_status_of_a_lake_without_a_ledger_imports_no_pandas(lake_env: LakeStorage) -> None:
    assert imported("status") == []  # pyarrow looks for pandas when it builds an array: the empty ledger


def test_query_imports_the_engine_and_sqlglot_but_not_dagster(lake_with_files: LakeStorage) -> None:
    assert imported("query", "SELECT count(*) AS n FROM lake_ledger") == ["pandas", "pyspark", "sqlglot"]  # Spark Connect's
