"""The Dagster resource for the Spark engine: configuration shown in the UI, nothing more.

Sessions are built by `SparkConfig` (resources/spark.py), which has no Dagster in it.
"""

from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lake_assets.resources.spark import SparkConfig
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings


def _default(name: str) -> Any:
    """`SparkConfig`'s default for field `name`: the resource copies its fields, not their values."""
    return SparkConfig.model_fields[name].default


class SparkEngine(dg.ConfigurableResource):
    """Where Spark work runs (see `SparkConfig` for what each field means)."""

    engine: str = _default("engine")
    remote: str = _default("remote")
    jars_dir: str = _default("jars_dir")
    packages: str = _default("packages")
    sail_mode: str = _default("sail_mode")
    sail_workers: int = _default("sail_workers")
    sail_max_workers: int = _default("sail_max_workers")
    sail_worker_task_slots: int = _default("sail_worker_task_slots")
    sail_parallelism: int = _default("sail_parallelism")

    @classmethod
    def from_settings(cls, settings: LakeSettings) -> "SparkEngine":
        return cls(**SparkConfig.from_settings(settings).model_dump())

    def session(self, storage: LakeStorage) -> SparkSession:
        """The process's session for this engine, able to read and write `storage`."""
        return SparkConfig(**{name: getattr(self, name) for name in SparkConfig.model_fields}).session(storage)
