"""A raw-zone sensor tick that waits for news, through Dagster's public sensor API.

Dagster's sensor daemon starts a sensor's evaluation at most once per loop, every 5 s
(`DAGSTER_SENSOR_LOOP_SECONDS`; not a setting), whatever `minimum_interval_seconds` asks
for: a tick that looked once would leave a file landing just after it unseen for up to 5 s,
half the freshness budget. So a tick keeps looking: it lists again every `poll_seconds`
until something is new, which it returns at once, or until `wait_seconds` (below the loop
period) have passed. The daemon starts the next tick at its next loop, so the zone is
listed about every `poll_seconds` all the time. With `sensors: use_threads` (dagster.yaml)
the sensors wait side by side instead of one after another.
"""

import time
from collections.abc import Callable

import dagster as dg

#: One look at the raw zone from a cursor: its result carries the cursor for the next look.
Look = Callable[[str | None], dg.SensorResult | dg.SkipReason]


def poll(look: Look, cursor: str | None, poll_seconds: float, wait_seconds: float) -> dg.SensorResult | dg.SkipReason:
    """`look` every `poll_seconds` until it requests a run, cannot look, or `wait_seconds` passed."""
    deadline = time.monotonic() + wait_seconds
    while True:
        result = look(cursor)
        if not isinstance(result, dg.SensorResult) or result.run_requests or \
                time.monotonic() + poll_seconds > deadline:
            return result
        cursor = result.cursor
        time.sleep(poll_seconds)
