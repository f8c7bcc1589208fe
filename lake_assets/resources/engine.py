"""The Dagster resource for the Spark engine: its configuration, shown in the UI, and one
session per run.

Sessions are built by `SparkConfig` (resources/spark.py), which has no Dagster in it. Within
a run the resource owns one session of the run's own (its own SQL settings, views and
catalog state), made at first use, shared by every step and check of the run, and forgotten
when the run's execution ends (`SparkConfig.run_session` says why it is not stopped); the
engine itself (the embedded Sail server, a JVM) stays up for the process. Outside a run (a resource built
by hand) `session` is the process's shared session.
"""

import threading
from typing import Any

import dagster as dg
from pydantic import PrivateAttr
from pyspark.sql import SparkSession

from lake_assets.resources.spark import SparkConfig, alive
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
    _in_run: bool = PrivateAttr(default=False)
    _run_session: SparkSession | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def from_settings(cls, settings: LakeSettings) -> "SparkEngine":
        return cls(**SparkConfig.from_settings(settings).model_dump())

    def config(self) -> SparkConfig:
        return SparkConfig(**{name: getattr(self, name) for name in SparkConfig.model_fields})

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._in_run = True

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self._run_session, self._in_run = None, False  # the run's session is not handed out again

    def session(self, storage: LakeStorage) -> SparkSession:
        """The run's session (made at first use), able to read and write `storage`; outside a
        run, the process's."""
        config = self.config()
        if not self._in_run:
            return config.session(storage)
        with self._lock:
            if self._run_session is None or not alive(self._run_session):  # dropped while idle: a new one
                self._run_session = config.run_session(storage)
            return self._run_session
