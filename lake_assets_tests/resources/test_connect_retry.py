"""A reply gRPC cannot decode is asked for again, a few times, on the lake's real engine session.

The undecodable reply itself cannot be produced on demand (it came about once in two full test
runs), so these tests put gRPC's own report of one in front of the real `Config` call: the fake
is only that third-party error, the session, client and Sail server are the lake's.
"""

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from lake_assets.resources import connect_retry
from lake_assets.resources.connect_retry import UNDECODABLE_REPLY, UndecodableReplyRetries

pytestmark = pytest.mark.integration


class UndecodableReply(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """What gRPC raises when protobuf cannot parse a reply (grpc._channel._InactiveRpcError's face)."""

    def __str__(self) -> str:
        return f"<_InactiveRpcError of RPC that terminated with: status = {self.code()} details = {self.details()!r}>"

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.INTERNAL

    def details(self) -> str:
        return UNDECODABLE_REPLY

    def trailing_metadata(self) -> None:
        return None

    def initial_metadata(self) -> None:
        return None

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return False


@pytest.fixture
def config_failures(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], list[int]]]:
    """Makes the session's next `Config` calls fail with an undecodable reply `n` times; counts calls."""
    stub = spark.client._stub
    real = stub.Config
    calls: list[int] = []

    def fail_first(n: int) -> list[int]:
        def config(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            if len(calls) <= n:
                raise UndecodableReply()
            return real(*args, **kwargs)

        stub.Config = config
        return calls

    monkeypatch.setattr(connect_retry, "REPLY_RETRIES", UndecodableReplyRetries())  # earlier retries do not count
    yield fail_first
    stub.Config = real


def test_an_undecodable_reply_is_asked_for_again(config_failures: Callable[[int], list[int]],
                                                  spark: SparkSession, caplog: pytest.LogCaptureFixture) -> None:
    calls = config_failures(1)
    with caplog.at_level(logging.WARNING, logger="lake_assets.resources.connect_retry"):
        assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert len(calls) == 2
    # said, so how often it happens shows in a run's output
    assert [r.getMessage() for r in caplog.records if r.name == "lake_assets.resources.connect_retry"] == [
        "Spark Connect: gRPC could not decode the engine's reply (Exception deserializing response!); asking again "
        "(1 of 3 in 30 s)"]


def test_a_reply_that_never_decodes_fails_within_seconds(config_failures: Callable[[int], list[int]],
                                                         spark: SparkSession) -> None:
    calls = config_failures(1_000)
    started = time.monotonic()
    with pytest.raises(PySparkException, match="Exception deserializing response"):
        spark.conf.get("spark.sql.session.timeZone")
    assert len(calls) == 4  # the call and three retries
    assert time.monotonic() - started < 5


def test_other_errors_keep_pyspark_rule() -> None:
    retries = UndecodableReplyRetries(limit=2, window=60)

    class Unavailable(UndecodableReply):
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.UNAVAILABLE

    assert not retries(Unavailable())  # PySpark's own rule decides those
    assert not retries(ValueError(UNDECODABLE_REPLY))
    assert [retries(UndecodableReply()) for _ in range(3)] == [True, True, False]
