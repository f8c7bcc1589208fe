"""`ignore_null_updates` with a full load: an update's NULL keeps the value before it, but never one
from before a published snapshot (its row says every column, NULLs too; a key it does not hold is
deleted at its base). The outcome does not depend on whether the snapshot and the update are
applied in one run or in two."""

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.tables import table_set
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.full_loads import load_load_change, loaded_table

FIRST_LOAD = "1,A,10\n2,B,20\n3,C,30\n"
SECOND_LOAD = "2,,20\n3,C,30\n"  # 2's name is NULL now; 1 is gone
LATER = "U,1,,11\nU,2,,21\n"  # later updates that leave the name NULL
#: 1 comes back without the name it had before the snapshot deleted it; 2 keeps the snapshot's NULL
EXPECTED = {1: (None, 11), 2: (None, 21), 3: ("C", 30)}


@pytest.mark.parametrize("together", [True, False])
def test_an_update_never_takes_a_value_from_before_the_snapshot(storage: LakeStorage, spark: SparkSession,
                                                                together: bool) -> None:
    table = loaded_table("nulls", ["name STRING", "amt INT"], "ignore_null_updates: true")
    load_load_change(storage, spark, table, FIRST_LOAD, SECOND_LOAD, LATER, together)
    rows = DeltaTable(table_set(table).table.uri(storage), storage_options=storage.delta_storage_options()) \
        .to_pyarrow_table().to_pylist()
    assert {r["id"]: (r["name"], r["amt"]) for r in rows} == EXPECTED
