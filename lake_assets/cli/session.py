"""What a CLI command needs: settings, a reachable object store, the engine, the Dagster instance.

Dagster and PySpark are imported only when a command asks for the instance or the engine,
so commands that only read storage do not pay for them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lake_assets.core.private_home import private_home

if TYPE_CHECKING:
    import dagster as dg
    from pyspark.sql import SparkSession

    from lake_assets.resources.storage import LakeStorage
    from lake_assets.settings import LakeSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTANCE_LOCK = "instance.lock"


@dataclass
class LakeSession:
    settings: LakeSettings
    storage: LakeStorage
    _instance: dg.DagsterInstance | None = field(default=None, init=False, repr=False)

    def spark(self) -> SparkSession:
        from lake_assets.resources.spark import SparkConfig

        return SparkConfig.from_settings(self.settings).session(self.storage)

    def instance(self) -> dg.DagsterInstance:
        """The lake's Dagster instance, built once per command (every job it runs shares it)."""
        if self._instance is None:
            self._instance = dagster_instance(self.settings)
        return self._instance


#: Dagster settings the lake's processes run with (a user's own value wins).
#: A run over a range of days logs ONE planned-materialization event per asset, with the
#: range, instead of one per day: creating the run of a 1,825-day first load wrote 3,650
#: events per two assets (36.6 s on 2 cores, ~17 min under load, long enough for the engine
#: to drop its idle session) and now writes 2 (3.2 s). Dagster's trade-off: a FAILED range
#: run shows its days as missing, not failed, in the UI (`lake status` and the run say why).
#: The materializations of a range run's days are handed to the event log as one batch (of up
#: to this many events), which the lake's sqlite event log writes at once (`event_log.py`).
DAGSTER_ENV = {"DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS": "true", "DAGSTER_EVENT_BATCH_SIZE": "10000"}


def prepare_dagster_home(settings: LakeSettings) -> Path:
    """Point DAGSTER_HOME at LAKE_HOME/dagster, holding the repository's dagster.yaml (LAKE_HOME
    created owner-only, or tightened if it is not)."""
    home = private_home(settings.home) / "dagster"
    home.mkdir(mode=0o700, exist_ok=True)
    source = REPO_ROOT / "dagster.yaml"
    target = home / "dagster.yaml"
    if source.exists() and (not target.exists() or target.read_bytes() != source.read_bytes()):
        # atomically, so a command starting at the same moment never reads half a file
        temporary = target.with_name(f".dagster.yaml.{os.getpid()}")
        temporary.write_bytes(source.read_bytes())
        os.replace(temporary, target)
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ["LAKE_HOME"] = str(settings.home)
    for name, value in DAGSTER_ENV.items():  # inherited by `lake dev`'s Dagster processes
        os.environ.setdefault(name, value)
    return home


def dagster_instance(settings: LakeSettings) -> dg.DagsterInstance:
    """The lake's Dagster instance; its storage is created under a file lock, so two first
    commands at once do not both create the sqlite tables."""
    import dagster as dg

    home = prepare_dagster_home(settings)
    with open(home / INSTANCE_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        instance = dg.DagsterInstance.get()
        # touch every storage so each creates its schema now, while we hold the lock
        instance.get_runs(limit=1)
        instance.fetch_run_status_changes(dg.DagsterEventType.RUN_SUCCESS, limit=1)
        instance.all_instigator_state()
    return instance


def importing(*modules: str) -> Callable[[], None]:
    """Work for `lake_session(while_starting=...)`: import `modules`, the ones the command
    uses next (a cold `lake status` imports delta-rs and pyarrow while weed boots)."""
    import importlib

    def run() -> None:
        for module in modules:
            importlib.import_module(module)

    return run


@contextlib.contextmanager
def lake_session(while_starting: Callable[[], object] | None = None) -> Iterator[LakeSession]:
    """Settings from the environment and a running object store for the command's duration.

    `while_starting`: the command's imports, run while an embedded server it starts boots.
    """
    from lake_assets.resources.storage import LakeStorage
    from lake_assets.settings import LakeSettings

    settings = LakeSettings.from_env()
    prepare_dagster_home(settings)
    with LakeStorage.from_settings(settings).running(while_starting) as storage:  # running() ensures the bucket
        yield LakeSession(settings, storage)
