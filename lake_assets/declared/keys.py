"""The asset keys of the lake's tables: a declared table's, those kept beside it, the ledger's."""

import dagster as dg

from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.tables import LakeTable, table_set


def asset_key(table: LakeTable) -> dg.AssetKey:
    """A table's asset: an Iceberg table's under its catalog namespace (`shop/orders`), a Delta table's its name."""
    return dg.AssetKey(table.asset_path)


def table_key(declaration: TableDeclaration) -> dg.AssetKey:
    """The declared table's own asset (its checks, freshness and partitions are on it)."""
    return asset_key(table_set(declaration).table)
