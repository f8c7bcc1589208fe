"""A declared table's job: what its raw-zone sensor and `lake run` launch."""

from typing import Any

import dagster as dg

from lake_assets.core.declaration import TableDeclaration
from lake_assets.runs import TABLE_TAG


def job_name(declaration: TableDeclaration) -> str:
    return f"apply_{declaration.name}"


def table_job(declaration: TableDeclaration, assets: dg.AssetsDefinition) -> Any:  # an unresolved asset job (Dagster exports no name for its type)
    """Apply every pending raw object of the table and run its checks (one run per table at a time: its tag)."""
    return dg.define_asset_job(
        job_name(declaration),
        selection=dg.AssetSelection.assets(assets),
        description=f"Apply every pending raw object of `{declaration.name}` (snapshots, then CDC in key order) "
                    "and run the checks.",
        tags={TABLE_TAG: declaration.table_name},
        executor_def=dg.in_process_executor,
    )
