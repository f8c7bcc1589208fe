"""A Dagster instance as the repository's dagster.yaml configures it, and what its run queue would launch."""

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon

REPO = Path(__file__).resolve().parents[2]


def repo_instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dg.DagsterInstance]:
    """A Dagster instance in `tmp_path` loading the repository's dagster.yaml from DAGSTER_HOME."""
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text((REPO / "dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        yield instance


def dequeued(instance: dg.DagsterInstance) -> list[str]:
    """The runs the daemon's queued run coordinator would launch now."""
    daemon = QueuedRunCoordinatorDaemon(interval_seconds=1)
    return [run.run_id for run in daemon._get_runs_to_dequeue(instance, instance.get_concurrency_config(), None)]
