"""The Dagster definitions of declared tables, made from their declarations alone (core/declaration.py)."""

import datetime as dt
from dataclasses import dataclass

from typing import Any

import dagster as dg

from lake_assets.core.declaration import TableDeclaration
from lake_assets.declared.assets import raw_assets, table_assets
from lake_assets.declared.checks import table_checks
from lake_assets.declared.jobs import table_job
from lake_assets.declared.keys import table_key
from lake_assets.declared.sensors import table_sensor


@dataclass(frozen=True)
class DeclaredDefinitions:
    """Everything one declared table contributes to the code location."""

    assets: list
    checks: list[dg.AssetChecksDefinition]
    job: Any  # an unresolved asset job (Dagster exports no name for its type)
    sensors: list[dg.SensorDefinition]


def declared(declaration: TableDeclaration, poll_seconds: float, wait_seconds: float) -> DeclaredDefinitions:
    tables = table_assets(declaration)
    job = table_job(declaration, tables)
    checks = table_checks(declaration)
    sensors = [table_sensor(declaration, job, poll_seconds, wait_seconds)]
    if declaration.freshness is not None:  # `freshness`: a check that fails once the table is older than allowed
        fresh = dg.build_last_update_freshness_checks(
            assets=[table_key(declaration)], lower_bound_delta=dt.timedelta(minutes=declaration.freshness.max_lag_minutes))
        checks += list(fresh)
        sensors.append(dg.build_sensor_for_freshness_checks(freshness_checks=fresh,
                                                            name=f"{declaration.name}_freshness_sensor"))
    return DeclaredDefinitions([*raw_assets(declaration), tables], checks, job, sensors)
