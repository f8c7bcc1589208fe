"""Jobs for the warm run launcher's tests: they report which process imported this module."""

import os
import time

import dagster as dg

#: The process that imported this module: the forkserver when the launcher preloaded it.
IMPORTED_BY_PID = os.getpid()


@dg.op
def report_process(context: dg.OpExecutionContext) -> None:
    context.log_event(dg.AssetObservation(asset_key="warm_probe", metadata={
        "imported_by_pid": IMPORTED_BY_PID, "running_pid": os.getpid()}))


@dg.op
def sleep_long() -> None:
    time.sleep(120)


@dg.job(executor_def=dg.in_process_executor)
def probe_job() -> None:
    report_process()


@dg.job(executor_def=dg.in_process_executor)
def sleeping_job() -> None:
    sleep_long()


defs = dg.Definitions(jobs=[probe_job, sleeping_job])
