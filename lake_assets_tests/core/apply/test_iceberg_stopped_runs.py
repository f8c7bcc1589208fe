"""A declared Iceberg table's run killed (a real SIGKILL) after its table commit, or at its
ledger write: the next run finishes it from its stage, recognising its commit as the snapshot
that follows the one it found (Sail keeps no label on an Iceberg snapshot), so the changes are
committed once, the ledger and the history follow, and nothing is applied twice or lost; until
then maintenance sees the stopped run and leaves the table alone."""

import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.apply.run import apply_pending
from lake_assets.core.formats import iceberg
from lake_assets.core.ledger import Ledger
from lake_assets.core.registry import read_file
from lake_assets.core.tables import table_set
from lake_assets.jobs.maintenance import stopped_run_waits
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.killed_run import KILLED, killed

NAMESPACE = "stopped"


def _declare(folder: Path) -> Path:
    name = f"orders_{uuid.uuid4().hex[:6]}"
    path = folder / f"{name}.yaml"
    path.write_text(f"""
name: {name}
group: {NAMESPACE}
format: iceberg
keys: [k]
columns:
  - {{name: k, type: INT, nullable: false}}
  - {{name: v, type: STRING}}
sources:
  - {{prefix: raw/{name}/cdc/, kind: cdc}}
""")
    return path


@pytest.mark.parametrize("seam", ["table-commit", "ledger"])
def test_a_stopped_run_is_finished_once(storage: LakeStorage, spark: SparkSession, tmp_path: Path, seam: str) -> None:
    path = _declare(tmp_path)
    declared = read_file(path)
    tables = table_set(declared)
    prefix = declared.sources[0].prefix
    storage.put_bytes(f"{prefix}20240101-000000000.csv", b"I,1,a\nI,2,b\nI,3,c\n")
    apply_pending(declared, storage, spark, "run-1")
    first = iceberg.current_snapshot_id(iceberg.open_table(storage, tables.table))

    storage.put_bytes(f"{prefix}20240102-000000000.csv", b"U,1,a2\nD,2,\nI,4,d\n")
    assert killed(storage, "declared", seam, str(path)) == KILLED
    stopped = iceberg.open_table(storage, tables.table).current_snapshot()
    assert stopped.parent_snapshot_id == first  # the killed run committed, once
    assert [e["status"] for e in Ledger(storage).entries(declared.table_name).to_pylist()] == ["applied"]
    assert stopped_run_waits(storage, tables.table)  # maintenance leaves the table alone: its next snapshot is the run's

    report = apply_pending(declared, storage, spark, "run-3")
    assert not stopped_run_waits(storage, tables.table)
    assert report.commits == []  # nothing pending after finishing the stopped run: no commit again
    found = iceberg.open_table(storage, tables.table)
    assert found.current_snapshot().snapshot_id == stopped.snapshot_id
    rows = {r["k"]: r["v"] for r in found.scan().to_arrow().to_pylist()}
    assert rows == {1: "a2", 3: "c", 4: "d"}
    entries = Ledger(storage).entries(declared.table_name).to_pylist()
    assert [(e["status"], e["rows_applied"], e["table_version"]) for e in entries] == [
        ("applied", 3, first), ("applied", 3, stopped.snapshot_id)]
    history = DeltaTable(tables.history.uri(storage), storage_options=storage.delta_storage_options())
    current = {r["k"]: r["v"] for r in history.to_pyarrow_table().to_pylist() if r["is_current"]}
    assert current == rows
