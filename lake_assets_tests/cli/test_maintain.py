"""`lake maintain`: the nightly maintenance job, run now from the CLI, says what it did per table and
changes no table's content."""

from lake_assets.core.formats.delta import open_table, to_arrow
from lake_assets.core.tables import table
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.conftest import DATA
from lake_assets_tests.helpers.cli import lake


def test_lake_maintain_compacts_and_keeps_every_row(lake_env: LakeStorage) -> None:
    storage = lake_env
    storage.put_bytes("raw/fullload/full-load.csv", (DATA / "fullload" / "full-load.csv").read_bytes())
    assert lake("run")[0] == 0
    for name in ("20240401-090000000.csv", "20240402-090000000.csv"):  # one run each: the ledger gets a file per run
        storage.put_bytes(f"raw/cdcload/{name}", (DATA / "cdcload" / name).read_bytes())
        assert lake("run")[0] == 0
    ledger = table("lake_ledger")
    files_before = open_table(storage, ledger).get_add_actions(flatten=True).num_rows
    assert files_before >= 3
    contents = {name: _rows(storage, name) for name in ("insurance", "insurance_history", "lake_ledger")}
    _, status_before = lake("status", "--format", "json")

    code, out = lake("maintain")
    assert code == 0, out
    line = next(text for text in out.splitlines() if text.startswith("lake_ledger: "))
    assert f"compacted {files_before} file(s)" in line and f"files {files_before} -> 1" in line, out
    assert out.count("insurance_history: ") == 1 and "versions readable from 0" in out  # nothing vacuumed inside the window
    assert open_table(storage, ledger).get_add_actions(flatten=True).num_rows == 1
    assert {name: _rows(storage, name) for name in contents} == contents  # delta-rs reads the same rows
    assert lake("status", "--format", "json")[1] == status_before


def _rows(storage: LakeStorage, name: str) -> list[str]:
    return sorted(map(str, to_arrow(open_table(storage, table(name))).to_pylist()))
