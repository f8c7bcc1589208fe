"""A Dagster instance as the repository's dagster.yaml configures it, and what its run queue would launch."""

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon

REPO = Path(__file__).resolve().parents[2]


#: Dagster's own launcher double (it records what it is asked to launch and starts nothing).
RECORDING_LAUNCHER = "run_launcher:\n  module: dagster._core.test_utils\n  class: MockedRunLauncher\n"


def repo_instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launcher: str | None = None,
                  ) -> Iterator[dg.DagsterInstance]:
    """A Dagster instance in `tmp_path` loading the repository's dagster.yaml from DAGSTER_HOME
    (its `run_launcher` replaced by `launcher`, a YAML section, if given)."""
    home = tmp_path / "dagster"
    home.mkdir()
    config = (REPO / "dagster.yaml").read_text()
    if launcher is not None:
        config = yaml.safe_dump({**yaml.safe_load(config), **yaml.safe_load(launcher)})
    (home / "dagster.yaml").write_text(config)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        yield instance


def dequeued(instance: dg.DagsterInstance) -> list[str]:
    """The runs the daemon's queued run coordinator would launch now."""
    daemon = QueuedRunCoordinatorDaemon(interval_seconds=1)
    return [run.run_id for run in daemon._get_runs_to_dequeue(instance, instance.get_concurrency_config(), None)]
