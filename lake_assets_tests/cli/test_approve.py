"""`lake status` shows a held full load and why; `lake approve` publishes it as one version."""

import json

from lake_assets.core.formats.delta import current_version
from lake_assets_tests.helpers.insurance_tables import INSURANCE
from lake_assets_tests.helpers.insurance_tables import DATA_COLUMN_NAMES
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.cli import lake

HEADER = ",".join(DATA_COLUMN_NAMES)


def test_held_full_load_shows_in_status_and_approve_publishes_it(lake_env: LakeStorage) -> None:
    rows = [f"{k},2024-01-31,Urban,CA,West,{k},Retail,N,Y" for k in range(1, 5)]
    lake_env.put_bytes("raw/fullload/a.csv", "\n".join([HEADER, *rows, ""]).encode())
    assert lake("run")[0] == 0
    lake_env.put_bytes("raw/fullload/b.csv", "\n".join([HEADER, rows[0], ""]).encode())  # 4 -> 1 rows
    code, out = lake("run")
    assert code == 0, out
    version = current_version(lake_env, INSURANCE)

    code, out = lake("status", "--format", "json")
    held = {r["file"]: r for r in json.loads(out)}["raw/fullload/b.csv"]
    assert held["status"] == "held" and held["detail"].startswith("shrinks: it would shrink the table from 4 to 1")
    assert "lake approve raw/fullload/b.csv" in held["detail"]

    code, out = lake("approve")
    assert code == 2 and "--all" in out
    code, out = lake("approve", "raw/fullload/nope.csv")
    assert code == 2 and "not held" in out
    code, out = lake("approve", "raw/fullload/b.csv")
    assert code == 0, out
    assert "approved s3://" in out and "rows 4 -> 1" in out
    assert current_version(lake_env, INSURANCE) == version + 1
    code, out = lake("status", "--format", "json")
    assert {r["file"]: r["status"] for r in json.loads(out)} == {"raw/fullload/a.csv": "applied",
                                                                  "raw/fullload/b.csv": "applied"}
    code, out = lake("approve", "--all")
    assert code == 2 and "no full load is held" in out
