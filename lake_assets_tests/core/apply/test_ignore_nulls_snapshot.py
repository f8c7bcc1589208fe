"""`ignore_null_updates` with a full load: an update's NULL keeps the value before it, but never one
from before a published snapshot (its row says every column, NULLs too; a key it does not hold is
deleted at its base). The outcome does not depend on whether the snapshot and the update are
applied in one run or in two."""

import uuid

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.apply.run import apply_pending
from lake_assets.core.registry import parse
from lake_assets.core.tables import table_set
from lake_assets.resources.storage import LakeStorage

FIRST_LOAD = "1,A,10\n2,B,20\n3,C,30\n"
SECOND_LOAD = "2,,20\n3,C,30\n"  # 2's name is NULL now; 1 is gone
LATER = "U,1,,11\nU,2,,21\n"  # later updates that leave the name NULL
#: 1 comes back without the name it had before the snapshot deleted it; 2 keeps the snapshot's NULL
EXPECTED = {1: (None, 11), 2: (None, 21), 3: ("C", 30)}


@pytest.mark.parametrize("together", [True, False])
def test_an_update_never_takes_a_value_from_before_the_snapshot(storage: LakeStorage, spark: SparkSession,
                                                                together: bool) -> None:
    name = f"nulls_{uuid.uuid4().hex[:6]}"
    table = parse(f"""
name: {name}
group: nulls
keys: [id]
columns:
  - {{name: id, type: INT, nullable: false}}
  - {{name: name, type: STRING}}
  - {{name: amt, type: INT}}
ignore_null_updates: true
sources:
  - {{prefix: raw/{name}/fullload/, kind: snapshot}}
  - {{prefix: raw/{name}/cdc/, kind: cdc}}
""", "test")
    storage.put_bytes(f"raw/{name}/fullload/v1/LOAD00000001.csv", FIRST_LOAD.encode())
    apply_pending(table, storage, spark, "run-1")
    storage.put_bytes(f"raw/{name}/fullload/v2/LOAD00000001.csv", SECOND_LOAD.encode())
    if not together:
        apply_pending(table, storage, spark, "run-2")
    storage.put_bytes(f"raw/{name}/cdc/20240402-100000000.csv", LATER.encode())
    apply_pending(table, storage, spark, "run-3")
    rows = DeltaTable(table_set(table).table.uri(storage), storage_options=storage.delta_storage_options()) \
        .to_pyarrow_table().to_pylist()
    assert {r["id"]: (r["name"], r["amt"]) for r in rows} == EXPECTED
