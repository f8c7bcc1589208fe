"""The insurance job: what the raw-zone sensor and `lake run` launch."""

import dagster as dg

from lake_assets.insurance.assets import insurance_tables
from lake_assets.runs import TABLE_TAG

apply_insurance_job = dg.define_asset_job(
    "apply_insurance",
    selection=dg.AssetSelection.assets(insurance_tables),
    description="Apply every pending raw insurance file (full loads, then CDC in key order) and run the checks.",
    tags={TABLE_TAG: "insurance"},
    executor_def=dg.in_process_executor,
)
