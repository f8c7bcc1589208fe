"""A timestamp literal is the instant it is made from, and a run asks only its own session.

PySpark's `F.lit(datetime)` asks the thread's *active* session for `spark.sql.timestampType`
(the first session the thread built). A test run hung ten minutes so: a test's own Sail server
had stopped, its session was the thread's active one, and the next run's feed write asked it
before its plan was sent.
"""

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from pysail.spark import SparkConnectServer
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.connect.session import SparkSession as ConnectSession

from lake_assets.core.instants import timestamp_literal
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.insurance.test_pipeline import CDC_1, FULL, cdc, full_load, put, row, run, table

pytestmark = pytest.mark.integration

INSTANTS = [dt.datetime(2026, 11, 29, 6, 30, 1, 123456, tzinfo=dt.timezone.utc),
            dt.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
            dt.datetime(1970, 1, 1, 0, 0, 0, 1),  # naive: local time, as PySpark takes it
            dt.datetime(1969, 7, 20, 20, 17, 40, tzinfo=dt.timezone.utc)]


def test_the_literal_is_the_instant(spark: SparkSession) -> None:
    """Against the instant itself and the session's own SQL literal of it in UTC (the lake's
    sessions are on UTC). Not against `F.lit(at)`: that asks the thread's active session, which
    in a full test run is a session an earlier test's server has dropped (it failed so)."""
    def sql_literal(at: dt.datetime) -> str:
        return f"TIMESTAMP '{at.astimezone(dt.timezone.utc):%Y-%m-%d %H:%M:%S.%f}'"

    columns = [c for i, at in enumerate(INSTANTS)
               for c in (timestamp_literal(at).alias(f"ours_{i}"), F.expr(sql_literal(at)).alias(f"sql_{i}"))]
    frame = spark.range(1).select(*columns, timestamp_literal(None).alias("none"))
    got = frame.collect()[0].asDict()
    for i, at in enumerate(INSTANTS):
        assert got[f"ours_{i}"] == got[f"sql_{i}"]
        assert got[f"ours_{i}"].astimezone(dt.timezone.utc) == at.astimezone(dt.timezone.utc)
    assert got["none"] is None
    assert {name: kind for name, kind in frame.dtypes if name.startswith("ours")} == {
        f"ours_{i}": "timestamp" for i in range(len(INSTANTS))}


@pytest.fixture
def someone_elses_active_session(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The thread's active session is on another Sail server; yields the `Config` calls it gets.
    (PySpark's active session and the client's stub are private; they are what is under test.)"""
    server = SparkConnectServer(ip="127.0.0.1", port=0)
    server.start(background=True)
    host, port = server.listening_address
    other = SparkSession.builder.remote(f"sc://{host}:{port}").create()
    calls: list[Any] = []
    real = other.client._stub.Config

    def config(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(other.client._stub, "Config", config)
    monkeypatch.setattr(ConnectSession._active_session, "session", other)
    yield calls
    server.stop()


def test_a_run_asks_nothing_of_the_threads_active_session(someone_elses_active_session: list[Any],
                                                         storage: LakeStorage, spark: SparkSession) -> None:
    assert ConnectSession.getActiveSession() is not spark
    put(storage, FULL, full_load(row(1, 100), row(2, 200)))
    run(storage, spark)
    put(storage, CDC_1, cdc(f"U,{row(1, 110)}", "D,2,,,,,,,,"))  # a commit with a feed, history and tombstones
    run(storage, spark)
    assert {key: r["insured_value"] for key, r in table(storage).items()} == {1: 110}
    assert someone_elses_active_session == []
