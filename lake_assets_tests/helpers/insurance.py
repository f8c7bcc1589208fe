"""The change core bound to the `insurance` declaration, as the insurance tests call it."""

import dagster as dg
from pyspark.sql import SparkSession

from lake_assets.core.apply import holds
from lake_assets.core.apply.plan import RawFile, pending, raw_files
from lake_assets.core.apply.restore import RestoreReport, restore_declared
from lake_assets.core.apply.run import ApplyReport, IngestRules, apply_pending as apply_declared
from lake_assets.core.ledger import Ledger
from lake_assets.core.snapshot_guard import Held, approve
from lake_assets.declared import sensors
from lake_assets.declared.assets import table_assets
from lake_assets.declared.jobs import table_job
from lake_assets.declared.sensors import table_sensor
from lake_assets.core.registry import declaration
from lake_assets.resources.storage import LakeStorage

INSURANCE = declaration("insurance")

#: Where the core stages an insurance run (core/apply/stage.py).
STAGING = f"staging/{INSURANCE.name}/"


def apply_pending(storage: LakeStorage, spark: SparkSession, run_id: str, rules: IngestRules | None = None,
                  reapply: bool = False) -> ApplyReport:
    return apply_declared(INSURANCE, storage, spark, run_id, rules, reapply)


def restore_insurance(storage: LakeStorage, version: int, run_id: str) -> RestoreReport:
    """`lake restore insurance --version N`."""
    return restore_declared(storage, INSURANCE, version, run_id)


def approve_held(storage: LakeStorage, keys: list[str] | None, run_id: str) -> list[Held]:
    """`lake approve` of insurance's held snapshots (all when `keys` is None)."""
    wanted = None if keys is None else [k.removeprefix(f"s3://{storage.bucket}/") for k in keys]
    return approve(Ledger(storage), holds.held_snapshots(INSURANCE, storage), wanted, run_id)


def pending_objects(storage: LakeStorage, ledger: Ledger, reapply: bool = False) -> list[RawFile]:
    return pending(INSURANCE, raw_files(INSURANCE, storage), ledger.latest(INSURANCE.name), reapply)


def insurance_sensor(poll_seconds: float = 1, wait_seconds: float = 0) -> dg.SensorDefinition:
    """The insurance table's raw-zone sensor, as definitions.py makes it."""
    return table_sensor(INSURANCE, table_job(INSURANCE, table_assets(INSURANCE)), poll_seconds, wait_seconds)


def raw_zone_tick(storage: LakeStorage, cursor: str | None, **kwargs) -> dg.SensorResult | dg.SkipReason:
    return sensors.raw_zone_tick(INSURANCE, storage, cursor, **kwargs)
