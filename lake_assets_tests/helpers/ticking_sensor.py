"""A code location with one sensor that notes each evaluation (for the sensor-loop test)."""

import os
import time

import dagster as dg

TICKS_FILE = "LAKE_TEST_TICKS_FILE"


@dg.op
def nothing() -> None:
    pass


@dg.job
def never_requested() -> None:
    nothing()


@dg.sensor(job=never_requested, minimum_interval_seconds=1, default_status=dg.DefaultSensorStatus.RUNNING)
def ticking(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    with open(os.environ[TICKS_FILE], "a") as ticks:
        ticks.write(f"{time.monotonic()}\n")
    return dg.SkipReason("counting ticks")


defs = dg.Definitions(jobs=[never_requested], sensors=[ticking])
