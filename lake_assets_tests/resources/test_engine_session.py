"""An engine session the server dropped (idle past its timeout) is rebuilt, never handed out dead."""

import time
from collections.abc import Iterator

import pytest
from pysail.spark import SparkConnectServer

from lake_assets.resources.spark import SparkConfig
from lake_assets.resources.storage import LakeStorage

pytestmark = pytest.mark.integration


@pytest.fixture
def short_lived_sessions(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A Sail server of its own that drops a session after 2 idle seconds (Sail's default is 900)."""
    monkeypatch.setenv("SAIL_SPARK__SESSION_TIMEOUT_SECS", "2")
    server = SparkConnectServer(ip="127.0.0.1", port=0)
    server.start(background=True)
    host, port = server.listening_address
    yield f"sc://{host}:{port}"
    server.stop()


def test_an_expired_session_is_rebuilt(short_lived_sessions: str, storage: LakeStorage) -> None:
    engine = SparkConfig(engine="remote", remote=short_lived_sessions)
    first = engine.session(storage)
    assert first.range(3).count() == 3
    assert engine.session(storage) is first  # a live session is reused
    time.sleep(4)  # the server drops the idle session
    with pytest.raises(Exception, match="is not running"):
        first.range(1).count()
    second = engine.session(storage)
    assert second is not first
    assert second.range(5).count() == 5


def test_a_session_the_lake_no_longer_uses_is_never_garbage_collected(storage: LakeStorage) -> None:
    """PySpark's `SparkSession.__del__` shuts down the process-wide pool that releases executions;
    run by garbage collection inside one of that pool's workers, it joined its own pool and hung
    every later query of the process (a CI run hung so). A run's session, once forgotten, stays
    referenced."""
    import gc
    import weakref

    first = SparkConfig().run_session(storage)  # PySpark keeps the process's first session (its default)
    session = SparkConfig().run_session(storage)
    assert session.range(2).count() == 2
    forgotten = weakref.ref(session)
    del session
    later = SparkConfig().run_session(storage)  # ... and the thread's newest (its active one)
    assert later.range(1).count() == 1 and first is not later
    gc.collect()
    assert forgotten() is not None
