"""The Dagster resource for the lake's object store: its configuration, shown in the UI, and
its lifecycle within a run.

Its fields are `settings.StorageSettings` (described there once; the UI shows each with its
default and variable). Assets, checks, sensors, schedules and jobs take a `StorageResource`
and work on the `LakeStorage` its `running()` / `attached()` give; all S3 logic lives in
`LakeStorage` (resources/storage.py), which has no Dagster in it. Secrets are not config:
they are read when a client is built.

A run owns one resolved storage: the resource's setup takes the run's lease on the
embedded server, checks the bucket and makes the run's S3 client; every step and check of
the run gets that storage from `running()` (and with it the one S3 client, delta-rs
options and Iceberg catalog it makes), and the teardown closes its clients and releases the
lease. The catalog is made at its first use in the run, not in the setup (as dagster-pyspark's
`LazyPySparkResource` makes its session): insurance runs never use it, and it costs a token
request, a config call and a `CreateTableBucket`. Sensors call `attached()`, which never
starts anything; their resource has no run, so its setup takes no lease.
"""

import contextlib
from collections.abc import Iterator

import dagster as dg
from pydantic import PrivateAttr

from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings, StorageSettings


class StorageResource(dg.ConfigurableResource, StorageSettings):
    """The lake's object store (see `StorageSettings` for what each field means)."""

    _run_scope: contextlib.ExitStack | None = PrivateAttr(default=None)
    _running: LakeStorage | None = PrivateAttr(default=None)

    @classmethod
    def from_settings(cls, settings: LakeSettings) -> "StorageResource":
        return cls(**settings.storage.model_dump())

    def storage(self) -> LakeStorage:
        """This configuration as a `LakeStorage` (no endpoint resolved yet)."""
        return LakeStorage(**{name: getattr(self, name) for name in StorageSettings.model_fields})

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        if context.run is None:  # a sensor's or a test's resource: blocks lease for themselves
            return
        with contextlib.ExitStack() as scope:
            running = scope.enter_context(self.storage().running())  # the lease, the bucket, the S3 client
            self._running, self._run_scope = running, scope.pop_all()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        scope, self._run_scope, self._running = self._run_scope, None, None
        if scope is not None:
            scope.close()  # closes the run's clients, then releases its lease

    @contextlib.contextmanager
    def running(self) -> Iterator[LakeStorage]:
        """The run's `LakeStorage` (reachable endpoint and bucket, the run's clients); outside a
        run (a sensor, a resource built by hand), `LakeStorage.running()` for the block."""
        if self._running is None:
            with self.storage().running() as running:
                yield running
            return
        yield self._running

    def attached(self) -> LakeStorage | None:
        """`LakeStorage.attached()`: the storage if its endpoint is up, without starting anything."""
        return self.storage().attached()
