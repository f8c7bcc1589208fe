"""A DMS full load written in parts (`LOAD00000001.csv`, `LOAD00000002.csv`, ... in one folder) is one
snapshot, also when a run applies a part before the next one lands (as the sensor does within a
second of a file landing): the later part joins the load the earlier run published and deletes none
of its keys. A part delivered again (new content under a name already applied) is a new load, which the
parts after it join."""

import uuid

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.apply.run import apply_pending
from lake_assets.core.ledger import Ledger
from lake_assets.core.registry import parse
from lake_assets.core.tables import table_set
from lake_assets.resources.storage import LakeStorage


def _rows(storage: LakeStorage, uri: str) -> dict[int, str]:
    rows = DeltaTable(uri, storage_options=storage.delta_storage_options()).to_pyarrow_table().to_pylist()
    return {r["id"]: r["v"] for r in rows}


def test_a_part_landing_after_a_run_joins_its_load(storage: LakeStorage, spark: SparkSession) -> None:
    name = f"parts_{uuid.uuid4().hex[:6]}"
    table = parse(f"""
name: {name}
group: parts
keys: [id]
columns:
  - {{name: id, type: INT, nullable: false}}
  - {{name: v, type: STRING}}
sources:
  - {{prefix: raw/{name}/fullload/, kind: snapshot}}
  - {{prefix: raw/{name}/cdc/, kind: cdc}}
""", "test")
    load = f"raw/{name}/fullload/"
    uri = table_set(table).table.uri(storage)

    def part(key: str, rows: dict[int, str], run: str) -> None:
        storage.put_bytes(load + key, "".join(f"{k},{v}\n" for k, v in rows.items()).encode())
        apply_pending(table, storage, spark, run)

    part("first/LOAD00000001.csv", {1: "a", 2: "b", 3: "c", 4: "d"}, "run-1")
    part("first/LOAD00000002.csv", {5: "e", 6: "f"}, "run-2")
    assert _rows(storage, uri) == {1: "a", 2: "b", 3: "c", 4: "d", 5: "e", 6: "f"}  # part 1's keys kept

    # a second load, in another folder: its first part alone is the snapshot as far as anyone knows...
    part("second/LOAD00000001.csv", {1: "A", 2: "B", 3: "C"}, "run-3")
    assert _rows(storage, uri) == {1: "A", 2: "B", 3: "C"}
    # ...until its next part lands: the same load, so it deletes none of part 1's keys
    part("second/LOAD00000002.csv", {4: "D", 5: "E"}, "run-4")
    assert _rows(storage, uri) == {1: "A", 2: "B", 3: "C", 4: "D", 5: "E"}

    # part 1 delivered again with other content: a new load (DMS's reload), whose snapshot is that
    # part alone so far...
    part("second/LOAD00000001.csv", {1: "x", 2: "y", 3: "z", 4: "w"}, "run-5")
    assert _rows(storage, uri) == {1: "x", 2: "y", 3: "z", 4: "w"}
    # ...until the reload's part 2 lands: it joins the reload, not the load it replaced
    part("second/LOAD00000002.csv", {5: "v"}, "run-6")
    assert _rows(storage, uri) == {1: "x", 2: "y", 3: "z", 4: "w", 5: "v"}

    entries = Ledger(storage).entries(name).to_pylist()
    assert all(e["status"] == "applied" for e in entries)
    assert all(e["rows_in_file"] == e["rows_applied"] + e["rows_superseded"] + e["rows_quarantined"] for e in entries)
