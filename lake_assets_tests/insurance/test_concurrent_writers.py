"""Two writers at once on one lake: the table lock serialises them, nothing is duplicated."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from lake_assets.core.formats.delta import open_table, to_arrow
from lake_assets.core.lock import lock_key, read_lease
from lake_assets.core.ledger import Ledger
from lake_assets_tests.helpers.insurance_tables import INSURANCE, INSURANCE_QUARANTINE
from lake_assets_tests.helpers.insurance_tables import DATA_COLUMN_NAMES, TABLE
from lake_assets_tests.helpers.insurance import STAGING
from lake_assets.resources.storage import LakeStorage

FULL_KEYS = range(1, 61)
CDC_KEYS = range(61, 91)


def _row(key: int, value: int) -> str:
    return f"{key},2030-01-31,Town {key},CA,West,{value},Retail,N,Y"


def _put_drops(storage: LakeStorage) -> None:
    """60 policies as a full load; a CDC file inserting 30 more, updating 10, and one bad row.

    (The bad row is a change, not part of the snapshot: a snapshot with rejected rows is held
    for `lake approve`, see test_pipeline.)"""
    full = [",".join(DATA_COLUMN_NAMES)] + [_row(k, 1000 + k) for k in FULL_KEYS]
    storage.put_bytes("raw/fullload/full-load.csv", ("\n".join(full) + "\n").encode())
    cdc = [f"I,{_row(k, 2000 + k)}" for k in CDC_KEYS] + [f"U,{_row(k, 5000 + k)}" for k in range(1, 11)]
    cdc.insert(15, "U,999,2023-02-30,Nowhere,CA,West,1,Retail,N,Y")  # bad date: quarantined once
    storage.put_bytes("raw/cdcload/20240401-090000000.csv", ("\n".join(cdc) + "\n").encode())


def _expected() -> dict[int, int]:
    model = {k: 1000 + k for k in FULL_KEYS} | {k: 2000 + k for k in CDC_KEYS}
    return model | {k: 5000 + k for k in range(1, 11)}


def _lake_env(storage: LakeStorage, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Environment of `lake` commands on the test's bucket, with the instance's storage created."""
    home = Path(storage.home)
    dagster_home = home / "dagster"
    dagster_home.mkdir(exist_ok=True)
    (dagster_home / "dagster.yaml").write_text(Path(__file__).parents[2].joinpath("dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    dg.DagsterInstance.get().dispose()  # create the instance's storage once, before the racers
    env = {**os.environ, "LAKE_HOME": str(home), "LAKE_S3_BUCKET": storage.bucket, "DAGSTER_HOME": str(dagster_home)}
    env.pop("LAKE_S3_ENDPOINT", None)
    return env


def _lake_run(env: dict[str, str]) -> subprocess.Popen:
    lake = str(Path(sys.executable).with_name("lake"))
    return subprocess.Popen([lake, "run"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.e2e
def test_two_lake_runs_at_once_apply_everything_exactly_once(storage: LakeStorage,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    env = _lake_env(storage, monkeypatch)
    _put_drops(storage)
    storage.put_bytes(f"{STAGING}killed-run/cdc.parquet", b"left behind by a killed run")
    runs = [_lake_run(env) for _ in range(2)]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    for run, output in zip(runs, outputs):
        assert run.returncode == 0, output
        assert "FAILED" not in output, output
    # one run applied the drops; the other waited for the lock, then found nothing pending
    assert sorted("rows 0 -> 90" in output for output in outputs) == [False, True], outputs
    assert sum("rows 90 -> 90" in output for output in outputs) == 1, outputs

    table = to_arrow(open_table(storage, INSURANCE))
    values = dict(zip(table["policy_id"].to_pylist(), table["insured_value"].to_pylist()))
    assert table.num_rows == len(values) == 90
    assert values == _expected()
    history = open_table(storage, INSURANCE).history()
    creates = [h for h in history if "CREATE" in h.get("operation", "")]
    assert len(creates) == 1, [h.get("operation") for h in history]
    quarantine = to_arrow(open_table(storage, INSURANCE_QUARANTINE))
    assert quarantine["reason"].to_pylist() == ["bad_date"]
    entries = Ledger(storage).entries(TABLE)
    assert sorted(entries["source_file"].to_pylist()) == ["raw/cdcload/20240401-090000000.csv",
                                                          "raw/fullload/full-load.csv"]
    assert storage.list_objects(STAGING) == []


@pytest.mark.e2e
def test_a_lake_run_killed_holding_the_lock_blocks_nothing(storage: LakeStorage,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    env = _lake_env(storage, monkeypatch)
    _put_drops(storage)
    victim = _lake_run(env)
    deadline = time.monotonic() + 120
    while read_lease(storage, "insurance") is None:  # killed while it holds the table
        assert victim.poll() is None and time.monotonic() < deadline, victim.communicate()[0]
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert storage.list_objects(lock_key("insurance"))  # its lease is left behind

    started = time.monotonic()
    rerun = _lake_run(env)
    output = rerun.communicate(timeout=300)[0]
    assert rerun.returncode == 0 and "FAILED" not in output, output
    assert time.monotonic() - started < 120  # took the dead run's lease over, did not wait out the TTL
    values = {r["policy_id"]: r["insured_value"] for r in to_arrow(open_table(storage, INSURANCE)).to_pylist()}
    assert values == _expected()
    assert storage.list_objects(STAGING) == [] and read_lease(storage, "insurance") is None
    runs = dg.DagsterInstance.get().get_run_records()
    statuses = sorted(r.dagster_run.status.value for r in runs[:2])
    assert statuses == ["FAILURE", "SUCCESS"]  # the killed run was failed, not left STARTED
