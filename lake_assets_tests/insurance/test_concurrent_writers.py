"""Two writers at once on one lake: the table lock serialises them, nothing is duplicated."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from lake_assets.core.formats.delta import open_table, to_arrow
from lake_assets.core.ledger import Ledger
from lake_assets.core.tables import INSURANCE, INSURANCE_QUARANTINE
from lake_assets.insurance.contract import DATA_COLUMN_NAMES, TABLE
from lake_assets.insurance.pipeline import STAGING
from lake_assets.resources.storage import LakeStorage

FULL_KEYS = range(1, 61)
CDC_KEYS = range(61, 91)


def _row(key: int, value: int) -> str:
    return f"{key},2030-01-31,Town {key},CA,West,{value},Retail,N,Y"


def _put_drops(storage: LakeStorage) -> None:
    """60 policies + one bad row as a full load; a CDC file inserting 30 more and updating 10."""
    full = [",".join(DATA_COLUMN_NAMES)] + [_row(k, 1000 + k) for k in FULL_KEYS]
    full.insert(30, "999,2023-02-30,Nowhere,CA,West,1,Retail,N,Y")  # bad date: quarantined once
    storage.put_bytes("raw/fullload/full-load.csv", ("\n".join(full) + "\n").encode())
    cdc = [f"I,{_row(k, 2000 + k)}" for k in CDC_KEYS] + [f"U,{_row(k, 5000 + k)}" for k in range(1, 11)]
    storage.put_bytes("raw/cdcload/20240401-090000000.csv", ("\n".join(cdc) + "\n").encode())


def _expected() -> dict[int, int]:
    model = {k: 1000 + k for k in FULL_KEYS} | {k: 2000 + k for k in CDC_KEYS}
    return model | {k: 5000 + k for k in range(1, 11)}


@pytest.mark.slow
def test_two_lake_runs_at_once_apply_everything_exactly_once(storage: LakeStorage, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path(storage.home)
    dagster_home = home / "dagster"
    dagster_home.mkdir(exist_ok=True)
    (dagster_home / "dagster.yaml").write_text(Path(__file__).parents[2].joinpath("dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    dg.DagsterInstance.get().dispose()  # create the instance's storage once, before the racers
    _put_drops(storage)
    storage.put_bytes(f"{STAGING}killed-run/cdc.parquet", b"left behind by a killed run")

    env = {**os.environ, "LAKE_HOME": str(home), "LAKE_S3_BUCKET": storage.bucket, "DAGSTER_HOME": str(dagster_home)}
    env.pop("LAKE_S3_ENDPOINT", None)
    lake = str(Path(sys.executable).with_name("lake"))
    runs = [subprocess.Popen([lake, "run"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for _ in range(2)]
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
