"""The Spark Connect client asks again when gRPC hands it a reply it cannot decode, a few times.

On these machines about one full test run in two meets one such reply: gRPC reports
`StatusCode.INTERNAL`, "Exception deserializing response!" (protobuf's `DecodeError` on a small
unary reply, a `ConfigResponse` or a `ReleaseExecuteResponse`), and the session's next calls
succeed. PySpark retries only an unavailable server, so the one bad reply failed a run. A
`ConfigRequest` or `AnalyzePlanRequest` changes nothing on the server, and an execution is
resumed by `ReattachExecute` (the protocol's way, never a second `ExecutePlan`), so asking
again is safe. A reply that never decodes (a client and server of different protocols) is
asked for at most `RETRIES_PER_WINDOW` times a window, so it fails within a second or two.

PySpark 3.5 takes its retry rule from one class method, `SparkConnectClient.retry_exception`
(4.0 takes policy objects); the lake wraps it once per process, keeping PySpark's own rule.
"""

import functools
import logging
import threading
import time
from collections import deque
from typing import Any

import grpc

UNDECODABLE_REPLY = "Exception deserializing response!"
RETRIES_PER_WINDOW = 3
WINDOW_SECONDS = 30.0

log = logging.getLogger(__name__)


def undecodable_reply(error: BaseException) -> bool:
    """Whether `error` is gRPC's report of a reply that protobuf could not parse."""
    return (isinstance(error, grpc.RpcError) and isinstance(error, grpc.Call)
            and error.code() == grpc.StatusCode.INTERNAL and error.details() == UNDECODABLE_REPLY)


class UndecodableReplyRetries:
    """Allows a retry for an undecodable reply while fewer than `limit` were allowed in `window` s."""

    def __init__(self, limit: int = RETRIES_PER_WINDOW, window: float = WINDOW_SECONDS) -> None:
        self._limit = limit
        self._window = window
        self._allowed: deque[float] = deque()
        self._lock = threading.Lock()

    def __call__(self, error: BaseException) -> bool:
        if not undecodable_reply(error):
            return False
        now = time.monotonic()
        with self._lock:
            while self._allowed and now - self._allowed[0] >= self._window:
                self._allowed.popleft()
            if len(self._allowed) >= self._limit:
                return False
            self._allowed.append(now)
            retries = len(self._allowed)
        # said each time, so how often it happens shows in the run's output and the engine's logs can be matched
        log.warning("Spark Connect: gRPC could not decode the engine's reply (%s); asking again (%d of %d in %.0f s)",
                    UNDECODABLE_REPLY, retries, self._limit, self._window)
        return True


REPLY_RETRIES = UndecodableReplyRetries()  # the process's window, shared by all its sessions


@functools.cache
def retry_undecodable_replies() -> None:
    """Make every Spark Connect client of this process retry undecodable replies."""
    from pyspark.sql.connect.client.core import SparkConnectClient

    pyspark_rule = SparkConnectClient.retry_exception

    def retry_exception(cls: Any, error: Exception) -> bool:
        return pyspark_rule(error) or REPLY_RETRIES(error)

    setattr(SparkConnectClient, "retry_exception", classmethod(retry_exception))  # noqa: B010 - a class method
