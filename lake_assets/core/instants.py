"""An instant as a Spark TIMESTAMP literal, made without a round trip to any session.

PySpark's Spark Connect client types a `datetime` literal (`F.lit(at)`) by asking the thread's
*active* session for `spark.sql.timestampType`: the first session the thread ever built, not
the one the plan is for. When that session is on a server that has gone (a remote engine
restarted, a test's own server stopped), the client retries it for ten minutes before the
plan is even sent; when it is on another server, the round trip is wasted. Microseconds since
the epoch are a plain BIGINT literal, and `timestamp_micros` (Spark 3.1 and Sail) makes them
the same TIMESTAMP.
"""

import datetime as dt

from pyspark.sql import Column
from pyspark.sql import functions as F

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def timestamp_literal(at: dt.datetime | None) -> Column:
    """`at` as a TIMESTAMP literal (NULL for None); a naive `at` is local time, as PySpark's own
    literal takes it."""
    if at is None:
        return F.lit(None).cast("timestamp")
    micros = (at.astimezone(dt.timezone.utc) - _EPOCH) // dt.timedelta(microseconds=1)
    return F.timestamp_micros(F.lit(micros))
