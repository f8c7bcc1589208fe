"""The Dagster resource for the Spark engine: configuration shown in the UI, nothing more.

Sessions are built by `SparkConfig` (resources/spark.py), which has no Dagster in it.
"""

import dagster as dg
from pyspark.sql import SparkSession

from lake_assets.resources.spark import SparkConfig
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings


class SparkEngine(dg.ConfigurableResource):
    """Where Spark work runs (see `SparkConfig` for what each field means)."""

    engine: str = "sail"
    remote: str = ""
    jars_dir: str = ""
    packages: str = ""
    sail_mode: str = "local"
    sail_workers: int = 0
    sail_max_workers: int = 0
    sail_worker_task_slots: int = 0
    sail_parallelism: int = 0

    @classmethod
    def from_settings(cls, settings: LakeSettings) -> "SparkEngine":
        return cls(**SparkConfig.from_settings(settings).model_dump())

    def session(self, storage: LakeStorage) -> SparkSession:
        """The process's session for this engine, able to read and write `storage`."""
        return SparkConfig(**{name: getattr(self, name) for name in SparkConfig.model_fields}).session(storage)
