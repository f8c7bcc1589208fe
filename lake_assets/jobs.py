"""Jobs: what a sensor, a schedule or `lake run` launches."""

import dagster as dg

from lake_assets.insurance.assets import insurance_tables

#: Runs that write the same table carry the same tag; dagster.yaml allows one at a time.
TABLE_TAG = "lake/table"

apply_insurance_job = dg.define_asset_job(
    "apply_insurance",
    selection=dg.AssetSelection.assets(insurance_tables),
    description="Apply every pending raw insurance file (full loads, then CDC in key order) and run the checks.",
    tags={TABLE_TAG: "insurance"},
    executor_def=dg.in_process_executor,
)
