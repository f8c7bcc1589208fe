"""Whether a batch holds at most one row per key: a per-key window is then not needed.

Most batches do: a snapshot's keys are distinct, and so are a first full load's. A window
partitioned by key shuffles and sorts every row of the batch with all its columns; this check is
an aggregate of the key columns alone, so a run asks it first and skips the window when it can
(resolve.py's newest change per key, history.py's versions of a first history write).
"""

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def keys_unique(rows: DataFrame, keys: list[str]) -> bool:
    """True if no key occurs in more than one row of `rows`."""
    repeated = rows.groupBy(*keys).agg(F.count(F.lit(1)).alias("_n")).where(F.col("_n") > 1)
    return not repeated.limit(1).count()
