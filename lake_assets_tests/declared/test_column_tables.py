"""The UI's column table of each asset a declaration makes is the columns the run writes, described."""

from pyspark.sql import SparkSession

from lake_assets.core.column_descriptions import column_descriptions
from lake_assets.core.formats.delta import open_table
from lake_assets.core.registry import declaration
from lake_assets.declared.assets import table_assets
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.insurance_tables import (
    INSURANCE,
    INSURANCE_CHANGES,
    INSURANCE_HISTORY,
    INSURANCE_QUARANTINE,
    INSURANCE_TOMBSTONES,
)
from lake_assets_tests.insurance.test_pipeline import cdc, full_load, put, row, run


def test_every_assets_column_table_is_its_written_columns(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/fullload/a.csv", full_load(row(1, 1), row(2, 1), "3,2024-02-30,Urban,CA,West,1,Retail,N,Y"))
    put(storage, "raw/cdcload/20240401-090000000.csv", cdc(f"U,{row(1, 2)}", "D,2,,,,,,,,"))
    run(storage, spark)
    specs = {spec.key.to_user_string(): spec for spec in table_assets(declaration("insurance")).specs}
    for table in (INSURANCE, INSURANCE_QUARANTINE, INSURANCE_TOMBSTONES, INSURANCE_CHANGES, INSURANCE_HISTORY):
        written = open_table(storage, table).schema().to_arrow().names
        shown = specs[table.name].metadata["dagster/column_schema"].columns
        assert [c.name for c in shown] == written, table.name
        assert all(c.description for c in shown), table.name
        unique = {c.name for c in shown if c.constraints.unique}  # a key has many rows in the feed and history
        assert unique == ({"policy_id"} if table is INSURANCE else set()), table.name
        described = column_descriptions(table.name)  # `DESCRIBE`'s comments, where the table stores none
        assert set(written) <= set(described), (table.name, set(written) - set(described))
