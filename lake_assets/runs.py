"""Runs whose process died are failed, so they stop holding their table's run slot.

A run killed with SIGKILL or SIGTERM never writes its end: Dagster keeps it STARTED, and
with it the `lake/table` slot of `dagster.yaml`'s `tag_concurrency_limits`, so every
queued run for that table waits forever. Dagster's run monitoring (enabled in dagster.yaml)
fails runs stuck STARTING or CANCELING, but the default run launcher cannot check whether
a STARTED run's worker is alive, and `lake run` executes in-process, where no launcher is
involved at all.

So every run records where it executes (`process_tags()`: pid, host and the process's
start time, which tells a reused pid apart; bookkeeping tags, out of sight in the UI) -- `lake run` when it creates the run, and the
asset or op itself when it starts, in the process that really runs it. `reap_dead_runs()`
fails the STARTED runs of this host whose process is gone; it is called where it is cheap
and sure to happen: before `lake run` starts its job and on every tick of the raw-zone
sensor (so a `lake dev` resumes within seconds).
"""

import os
import socket
from collections.abc import Mapping
from pathlib import Path

import dagster as dg

from lake_assets.core.processes import pid_alive

#: Run tags under this prefix are stored and filterable but left out of Dagster's UI (its
#: GraphQL API drops them). Written out, not imported from Dagster's private modules; the UI
#: test (lake_assets_tests/ui/test_dagster_ui.py) fails if Dagster stops hiding them.
HIDDEN_TAG_PREFIX = ".dagster/"


def bookkeeping_tag(name: str) -> str:
    """The key of a run tag the lake's code reads but a person need not see.

    Dagster's UI leaves out every run tag under `HIDDEN_TAG_PREFIX`: the runs list and the
    run's tag dialog do not show them, while the instance stores them and filters runs by
    them as by any tag.
    """
    return f"{HIDDEN_TAG_PREFIX}lake_{name}"


#: Runs that write the same table carry the same tag; dagster.yaml allows one at a time.
TABLE_TAG = "lake/table"
PID_TAG = bookkeeping_tag("pid")
HOST_TAG = bookkeeping_tag("host")
PROCESS_STARTED_TAG = bookkeeping_tag("process_started")


#: The code location of workspace.yaml and the repository Dagster makes of `Definitions`.
CODE_LOCATION = "lake"
REPOSITORY = "__repository__"
#: Dagster tags a run launched from a code location with its label; a job's page in the UI lists
#: the runs of that job carrying it. A run the CLI executes in its own process has no such origin,
#: so `lake run`, `lake restore`, `lake backfill` and `lake demo` put the tag on theirs.
REPOSITORY_TAG = f"{HIDDEN_TAG_PREFIX}repository"


def location_tags() -> dict[str, str]:
    """Tags that place a run the CLI executes on its job's page, as if launched from the UI."""
    return {REPOSITORY_TAG: f"{REPOSITORY}@{CODE_LOCATION}"}


def process_tags(pid: int | None = None) -> dict[str, str]:
    """Tags naming process `pid` of this host (default: this one): put them on a run it executes."""
    pid = os.getpid() if pid is None else pid
    return {PID_TAG: str(pid), HOST_TAG: socket.gethostname(), PROCESS_STARTED_TAG: process_start(pid)}


def record_process(instance: dg.DagsterInstance, run_id: str) -> None:
    """Tag run `run_id` with the process executing it (call it first thing in an asset or op)."""
    if instance.has_run(run_id):  # a run built for a test may not be stored
        instance.add_run_tags(run_id, process_tags())


def process_start(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, from /proc), or "" if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the name before ")" may hold spaces


def process_gone(tags: Mapping[str, str]) -> bool:
    """True only if the tags name a process of this host that no longer exists."""
    pid = tags.get(PID_TAG, "")
    if tags.get(HOST_TAG) != socket.gethostname() or not pid.isdigit():
        return False  # another host's run, or one that never said where it runs
    if not pid_alive(int(pid)):
        return True
    started = tags.get(PROCESS_STARTED_TAG, "")
    now = process_start(int(pid))
    return bool(started and now and started != now)  # the pid was reused by another process


def reap_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Fail every STARTED run of this host whose process is gone; return their run ids."""
    reaped = []
    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])):
        run = record.dagster_run
        if not process_gone(run.tags):
            continue
        current = instance.get_run_by_id(run.run_id)  # it may have ended just before its process did
        if current is None or current.status != dg.DagsterRunStatus.STARTED:
            continue
        instance.report_run_failed(
            current, f"the process running it (pid {run.tags[PID_TAG]} on {run.tags[HOST_TAG]}) is gone: "
                     "it was killed or crashed; its table's pending files are applied by the next run")
        reaped.append(run.run_id)
    return reaped
