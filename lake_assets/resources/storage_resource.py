"""The Dagster resource for the lake's object store: its configuration, shown in the UI, and
its lifecycle within a run.

Assets, checks, sensors, schedules and jobs take a `StorageResource` and work on the
`LakeStorage` its `running()` / `attached()` give; all S3 logic lives in `LakeStorage`
(resources/storage.py), which has no Dagster in it. Secrets are not config: they are read
when a client is built.

Within a run the resource owns one lease on the embedded server: the first `running()`
takes it, every later step and check of the run reuses it, and the resource releases it
when the run's execution ends. Sensors call `attached()`, which never starts anything.
"""

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import dagster as dg
from pydantic import PrivateAttr

from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings


def _default(name: str) -> Any:
    """`LakeStorage`'s default for field `name`: the resource copies its fields, not their values."""
    return LakeStorage.model_fields[name].default


class StorageResource(dg.ConfigurableResource):
    """The lake's object store (see `LakeStorage` for what each field means)."""

    endpoint: str = _default("endpoint")
    bucket: str = _default("bucket")
    region: str = _default("region")
    home: str = _default("home")
    embedded_port: int = _default("embedded_port")
    embedded_port_fallback: bool = _default("embedded_port_fallback")
    catalog_uri: str = _default("catalog_uri")
    warehouse: str = _default("warehouse")
    _run_scope: contextlib.ExitStack | None = PrivateAttr(default=None)
    _running: LakeStorage | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def from_settings(cls, settings: LakeSettings) -> "StorageResource":
        return cls(**LakeStorage.from_settings(settings).model_dump())

    def storage(self) -> LakeStorage:
        """This configuration as a `LakeStorage` (no endpoint resolved yet)."""
        return LakeStorage(**{name: getattr(self, name) for name in LakeStorage.model_fields})

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._run_scope = contextlib.ExitStack()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        scope, self._run_scope, self._running = self._run_scope, None, None
        if scope is not None:
            scope.close()  # releases the run's lease

    @contextlib.contextmanager
    def running(self) -> Iterator[LakeStorage]:
        """`LakeStorage.running()`: a reachable endpoint and bucket for the block, leased once per run."""
        if self._run_scope is None:  # outside a run's execution (e.g. built by hand): for the block
            with self.storage().running() as running:
                yield running
            return
        with self._lock:
            if self._running is None:
                self._running = self._run_scope.enter_context(self.storage().running())
        yield self._running

    def attached(self) -> LakeStorage | None:
        """`LakeStorage.attached()`: the storage if its endpoint is up, without starting anything."""
        return self.storage().attached()
