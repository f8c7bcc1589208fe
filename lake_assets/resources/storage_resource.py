"""The Dagster resource for the lake's object store: configuration shown in the UI, nothing more.

Assets, checks, sensors, schedules and jobs take a `StorageResource` and work on the
`LakeStorage` its `running()` / `attached()` give; all S3 logic lives in `LakeStorage`
(resources/storage.py), which has no Dagster in it. Secrets are not config: they are read
when a client is built.
"""

import contextlib
from collections.abc import Iterator

import dagster as dg

from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings


class StorageResource(dg.ConfigurableResource):
    """The lake's object store (see `LakeStorage` for what each field means)."""

    endpoint: str = ""
    bucket: str = "lake"
    region: str = "us-east-1"
    home: str = ".lake"
    embedded_port: int = 8333
    embedded_port_fallback: bool = True
    catalog_uri: str = ""
    warehouse: str = "warehouse"

    @classmethod
    def from_settings(cls, settings: LakeSettings) -> "StorageResource":
        return cls(**LakeStorage.from_settings(settings).model_dump())

    def storage(self) -> LakeStorage:
        """This configuration as a `LakeStorage` (no endpoint resolved yet)."""
        return LakeStorage(**{name: getattr(self, name) for name in LakeStorage.model_fields})

    @contextlib.contextmanager
    def running(self) -> Iterator[LakeStorage]:
        """`LakeStorage.running()`: a reachable endpoint and bucket for the block."""
        with self.storage().running() as running:
            yield running

    def attached(self) -> LakeStorage | None:
        """`LakeStorage.attached()`: the storage if its endpoint is up, without starting anything."""
        return self.storage().attached()
