"""The Dagster definitions of declared tables, made from their declarations alone (core/declaration.py)."""

from dataclasses import dataclass

from typing import Any

import dagster as dg

from lake_assets.core.declaration import TableDeclaration
from lake_assets.declared.assets import raw_assets, table_assets
from lake_assets.declared.checks import table_checks
from lake_assets.declared.jobs import table_job
from lake_assets.declared.sensors import table_sensor


@dataclass(frozen=True)
class DeclaredDefinitions:
    """Everything one declared table contributes to the code location."""

    assets: list
    checks: list[dg.AssetChecksDefinition]
    job: Any  # an unresolved asset job (Dagster exports no name for its type)
    sensor: dg.SensorDefinition


def declared(declaration: TableDeclaration, poll_seconds: float, wait_seconds: float) -> DeclaredDefinitions:
    tables = table_assets(declaration)
    job = table_job(declaration, tables)
    return DeclaredDefinitions([*raw_assets(declaration), tables], table_checks(declaration), job,
                               table_sensor(declaration, job, poll_seconds, wait_seconds))
