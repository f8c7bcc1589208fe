"""Frames put together so that a plan's depth does not grow with the number of its parts.

Spark Connect sends a plan as one nested message that the client builds recursively: a union
folded one part at a time is as deep as its parts, and Python's recursion limit stopped one of
400 reads (measured on Sail: `RecursionError` in the client). `union_all` pairs the parts up, so
the depth is the logarithm of their number.
"""

from collections.abc import Sequence

from pyspark.sql import DataFrame


def union_all(frames: Sequence[DataFrame]) -> DataFrame:
    """`frames` (at least one) stacked by column name, as a balanced tree of unions."""
    if not frames:
        raise ValueError("union_all needs at least one frame")
    level = list(frames)
    while len(level) > 1:
        level = [level[i].unionByName(level[i + 1]) if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
    return level[0]
