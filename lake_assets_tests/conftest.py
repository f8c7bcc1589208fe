"""Shared fixtures: one real embedded S3 server (SeaweedFS) and one Sail engine per session.

Each test gets its own bucket on that server, so tests never see each other's tables.

Every test gets one tier (see the README's "Tests"): `e2e`, `cluster` or `jvm` where it says so, `integration` where it
uses the session's S3 server (directly or through `storage`, `spark`, `catalog`, ... which all
depend on `s3_server`) or says so, `unit` otherwise. A unit test may start no process; the guard
below fails one that does. PySpark, Dagster, the engine and the S3 server are imported inside the
fixtures, so a unit test file pays only for what it imports itself.
"""

import _posixsubprocess
import os
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hypothesis
import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lake_assets.resources.catalog import LakeCatalog
    from lake_assets.resources.embedded_s3 import EmbeddedS3
    from lake_assets.resources.storage import LakeStorage

#: A session that writes into the checkout fails, naming the paths (tests write into tmp_path).
pytest_plugins = ("lake_assets_tests.checkout_guard",)

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data"

#: The property tests' examples come from each test's name, not a random seed: the suite runs the
#: same examples everywhere, so CI fails only on a change, never on a draw. To look for new
#: counterexamples: `HYPOTHESIS_PROFILE=explore uv run pytest ... --hypothesis-seed=N`.
hypothesis.settings.register_profile("suite", derandomize=True, database=None)
hypothesis.settings.register_profile("explore")
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))

TIERS = ("unit", "integration", "e2e", "cluster", "jvm")
SERVER_FIXTURES = {"s3_server"}  # every fixture that reaches a server depends on this one


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier, unless it names one itself."""
    for item in items:
        if any(item.get_closest_marker(tier) for tier in TIERS):
            continue
        uses_server = SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))
        item.add_marker("integration" if uses_server else "unit")


def _refuse(start: Callable[..., Any], what: str, allowed: set[threading.Thread]) -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() not in allowed:
            raise RuntimeError(f"a unit test started {what}: mark it pytest.mark.integration")
        return start(*args, **kwargs)
    return refused


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(request: pytest.FixtureRequest) -> None:
    """A unit test that starts a process (a server, `lake`, a Dagster run) fails, naming the fix.

    Python starts a process through one of these three calls (subprocess; multiprocessing's
    spawn and forkserver; its fork)."""
    if request.node.get_closest_marker("unit") is None:
        return
    # requested here, not as an argument: set up first, an autouse monkeypatch would be undone last,
    # after the test's own fixtures' teardown had run with the test's patches still in place
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    # threads that were running before the test (a session server's, not the test's) may go on
    others = set(threading.enumerate()) - {threading.main_thread()}
    execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]
    monkeypatch.setattr(subprocess.Popen, "_execute_child", _refuse(execute_child, "a process", others))
    monkeypatch.setattr(_posixsubprocess, "fork_exec", _refuse(_posixsubprocess.fork_exec, "a process", others))
    monkeypatch.setattr(os, "fork", _refuse(os.fork, "a forked process", others))


@pytest.fixture(scope="session")
def lake_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lake-home")


@pytest.fixture(scope="session")
def s3_server(lake_home: Path) -> Iterator["EmbeddedS3"]:
    from lake_assets.resources.embedded_s3 import embedded_s3, free_port
    from lake_assets.settings import embedded_credentials

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "LAKE_S3_ENDPOINT"):
        os.environ.pop(name, None)
    # the session holds a lease: the server outlives every command a test runs against it
    with embedded_s3(lake_home, free_port(), embedded_credentials(lake_home)) as server:
        yield server


def make_storage(endpoint: str, lake_home: Path, bucket: str) -> "LakeStorage":
    """A storage bound to a running S3 endpoint, using the credentials generated for `lake_home`."""
    from lake_assets.resources.storage import LakeStorage

    storage = LakeStorage(bucket=bucket, home=str(lake_home)).with_endpoint(endpoint)
    storage.ensure_bucket()
    return storage


@pytest.fixture
def storage(s3_server: "EmbeddedS3", lake_home: Path) -> Iterator["LakeStorage"]:
    storage = make_storage(s3_server.endpoint, lake_home, f"t-{uuid.uuid4().hex[:12]}")
    yield storage
    storage.delete_prefix("")  # frees the server's volumes for the next tests
    storage.get_client().delete_bucket(Bucket=storage.bucket)


@pytest.fixture
def spark(storage: "LakeStorage") -> "SparkSession":
    from lake_assets.resources.engine import SparkEngine

    return SparkEngine().session(storage)


@pytest.fixture
def catalog(storage: "LakeStorage") -> Iterator["LakeCatalog"]:
    """The session server's Iceberg REST catalog, with no `tpcds` tables left by earlier tests."""
    from lake_assets_tests.helpers.iceberg import drop_namespace_tables

    lake = storage.catalog()
    drop_namespace_tables(lake, "tpcds")
    yield lake
