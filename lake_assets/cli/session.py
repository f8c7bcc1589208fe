"""What a CLI command needs: settings, a reachable object store, the engine, the Dagster instance."""

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from pyspark.sql import SparkSession

from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class LakeSession:
    settings: LakeSettings
    storage: LakeStorage

    def spark(self) -> SparkSession:
        return SparkEngine.from_settings(self.settings).session(self.storage)

    def instance(self) -> dg.DagsterInstance:
        return dg.DagsterInstance.get()


def prepare_dagster_home(settings: LakeSettings) -> Path:
    """Point DAGSTER_HOME at LAKE_HOME/dagster, holding the repository's dagster.yaml."""
    home = settings.home / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    source = REPO_ROOT / "dagster.yaml"
    if source.exists():
        shutil.copyfile(source, home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ["LAKE_HOME"] = str(settings.home)
    return home


@contextlib.contextmanager
def lake_session() -> Iterator[LakeSession]:
    """Settings from the environment and a running object store for the command's duration."""
    settings = LakeSettings.from_env()
    prepare_dagster_home(settings)
    with LakeStorage.from_settings(settings).running() as storage:
        storage.ensure_bucket()
        yield LakeSession(settings, storage)
