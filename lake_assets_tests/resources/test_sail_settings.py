"""Sail's own settings (`SAIL_MODE`, worker counts): typed in settings.py, carried by the engine resource."""

import dataclasses
import socket
import time

import pytest

from lake_assets.core.errors import EngineUnavailable, UsageError
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.spark import SparkConfig
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import ENV_VARS, LakeSettings, SailSettings

SAIL_VARIABLES = ("SAIL_MODE", "SAIL_CLUSTER__WORKER_INITIAL_COUNT", "SAIL_CLUSTER__WORKER_MAX_COUNT",
                  "SAIL_CLUSTER__WORKER_TASK_SLOTS", "SAIL_EXECUTION__DEFAULT_PARALLELISM")


@pytest.fixture(autouse=True)
def _no_sail_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SAIL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_unset_means_local_mode_and_sails_defaults() -> None:
    assert LakeSettings.from_env().spark.sail == SailSettings()
    assert SailSettings().environment() == {"SAIL_MODE": "local"}  # no count forced on Sail


def test_local_cluster_settings_reach_the_engine_resource(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {"SAIL_MODE": "Local-Cluster", "SAIL_CLUSTER__WORKER_INITIAL_COUNT": "2",
              "SAIL_CLUSTER__WORKER_MAX_COUNT": "3", "SAIL_CLUSTER__WORKER_TASK_SLOTS": "4",
              "SAIL_EXECUTION__DEFAULT_PARALLELISM": "0"}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    settings = LakeSettings.from_env()
    assert settings.spark.sail == SailSettings(sail_mode="local-cluster", sail_workers=2, sail_max_workers=3,
                                               sail_worker_task_slots=4)
    # the Dagster resource shows them and builds the same session configuration
    engine = SparkEngine.from_settings(settings)
    assert (engine.sail_mode, engine.sail_workers, engine.sail_max_workers) == ("local-cluster", 2, 3)
    config = SparkConfig.from_settings(settings)
    assert config.sail == settings.spark.sail
    # what the Sail server is started with: Sail's own names, parallelism left to Sail (0)
    assert config.sail.environment() == {"SAIL_MODE": "local-cluster", "SAIL_CLUSTER__WORKER_INITIAL_COUNT": "2",
                                         "SAIL_CLUSTER__WORKER_MAX_COUNT": "3",
                                         "SAIL_CLUSTER__WORKER_TASK_SLOTS": "4"}
    # a different mode is a different engine: its own server and session in the process
    assert config != SparkConfig.from_settings(
        dataclasses.replace(settings, spark=settings.spark.model_copy(update=SailSettings().model_dump())))


@pytest.mark.parametrize(("name", "value", "message"), [
    ("SAIL_MODE", "kubernetes-cluster", "LAKE_SPARK_REMOTE"),
    ("SAIL_MODE", "cluster", "local, local-cluster"),
    ("SAIL_CLUSTER__WORKER_INITIAL_COUNT", "two", "not a whole number"),
    ("SAIL_CLUSTER__WORKER_TASK_SLOTS", "-1", "at least 1"),
])
def test_a_bad_value_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str,
                                                     message: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(UsageError, match=name) as raised:
        LakeSettings.from_env()
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_every_sail_variable_is_documented() -> None:
    assert set(SAIL_VARIABLES) <= set(ENV_VARS)


def test_a_remote_engine_that_is_not_there_fails_in_seconds_in_one_line() -> None:
    """PySpark alone would retry for minutes; the lake says at once that nothing listens there."""
    with socket.socket() as holder:  # a port that was free a moment ago and has no listener
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
    storage = LakeStorage().with_endpoint("http://127.0.0.1:1")
    started = time.monotonic()
    with pytest.raises(EngineUnavailable, match=f"no Spark Connect server at 127.0.0.1:{port}") as raised:
        SparkConfig(engine="remote", remote=f"sc://127.0.0.1:{port}/;token=do-not-print").session(storage)
    assert time.monotonic() - started < 10
    assert "do-not-print" not in str(raised.value) and "lake engine serve" in str(raised.value)
    with pytest.raises(EngineUnavailable, match="is not sc://host:port"):
        SparkConfig(engine="remote", remote="sc://127.0.0.1:port").session(storage)
