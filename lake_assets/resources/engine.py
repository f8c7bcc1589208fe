"""The Dagster resource for the Spark engine: its configuration, shown in the UI, and one
session per run.

Its fields are `settings.EngineSettings` (described there once). Sessions are built by
`SparkConfig` (resources/spark.py), which has no Dagster in it. Within a run the resource
owns one session of the run's own (its own SQL settings, views and catalog state), made at
first use, shared by every step and check of the run, and forgotten when the run's execution
ends (`SparkConfig.run_session` says why it is not stopped); the engine itself (the embedded
Sail server, a JVM) stays up for the process. Outside a run (a resource built by hand)
`session` is the process's shared session.
"""

import threading

import dagster as dg
from pydantic import PrivateAttr
from pyspark.sql import SparkSession

from lake_assets.resources.spark import SparkConfig, alive
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import EngineSettings, LakeSettings


class SparkEngine(dg.ConfigurableResource, EngineSettings):
    """Where Spark work runs (see `EngineSettings` for what each field means)."""

    _in_run: bool = PrivateAttr(default=False)
    _run_session: SparkSession | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def from_settings(cls, settings: LakeSettings) -> "SparkEngine":
        return cls(**settings.spark.model_dump())

    def config(self) -> SparkConfig:
        return SparkConfig(**{name: getattr(self, name) for name in EngineSettings.model_fields})

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
