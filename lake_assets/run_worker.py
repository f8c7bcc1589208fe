"""Run processes forked from one that has imported the code location:
`python -m lake_assets.run_worker MODULE REPORT_FD`.

It imports what every run of the code location imports before its first step (Dagster and its
instance storage, the code location MODULE, the Spark Connect client and pandas: ~3.5 s of one
core on a 2-core machine), then reads lines on stdin, each the serialized command line of one run
after `dagster` (`["api", "execute_run", ARGS]`: the command Dagster's container launchers run, as
JSON). For each line it forks: the child executes that run in the interpreter it inherited and
exits, one run per process as with Dagster's default launcher; this process writes the child's PID
on REPORT_FD and waits for the next line. So the imports happen once per version of the code, not
once per run, and no run shares the cores with the imports of the run after it. EOF (the launcher
has gone, or it discarded this process) ends it; the runs it forked go on.

Forking a process that has threads copies only the forking one. The Spark Connect client starts a
thread pool at import (to release finished executions); this process shuts it down before its
first fork, and a run's client starts a new one when it finds none. So it forks with no Python
thread but its own; its native threads (jemalloc's background threads, OpenBLAS's) belong to
libraries that handle a fork themselves. Nothing else is opened before a fork: no Spark session,
no engine, no database connection.

A warm-up import that fails is left for the run to meet: `execute_run` imports the code location
again and reports its error on the run, as in a process started cold.
"""

import atexit
import contextlib
import gc
import importlib
import json
import os
import signal
import sys
import warnings
from typing import NoReturn

#: What a run's process imports before its first step, besides the code location.
WARM_MODULES = (
    "dagster",
    "dagster._cli",
    "lake_assets.event_log",  # the instance's event log storage (with Dagster's sqlite storages)
    "dagster._core.storage.runs.sqlite",
    "dagster._core.storage.schedules.sqlite",
    "pyspark.sql.connect.session",  # the Spark Connect client, and pandas with it
    "pysail.spark",  # the embedded engine a run starts
    "boto3",  # the storage resource's S3 client, made at every run's start
    "botocore.config",
    "upath",  # the instance's state storage
    "pyarrow.acero",  # the planner's listing
)


def warm(module: str) -> None:
    for name in (*WARM_MODULES, module):
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    with contextlib.suppress(Exception):
        _load_s3_model()


def _load_s3_model() -> None:
    """Build one S3 client and drop it: boto3's default session keeps what building one loads (the
    service model, the endpoint rules: ~0.5 s), so the run's storage client is built from its cache."""
    from lake_assets.resources.storage import boto3_client

    boto3_client("s3", region_name="us-east-1", aws_access_key_id="warm", aws_secret_access_key="warm")


def main(argv: list[str]) -> int:
    # Waiting, it holds no run: Ctrl-C in `lake dev`'s terminal reaches its process group, and the
    # launcher's end (stdin closed) is what stops a waiting process, without a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    module, report = argv[0], int(argv[1])
    warm(module)
    _stop_release_pool()
    gc.freeze()  # what was imported stays out of the children's collections: its pages stay shared
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the runs' processes
    with os.fdopen(report, "w") as reports:
        while line := sys.stdin.readline():
            if not line.strip():
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            with warnings.catch_warnings():  # Python 3.12 warns of any thread; the native ones above are fork-safe
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:
                reports.close()
                code = 1
                try:
                    code = _execute(json.loads(line))
                finally:
                    _end(code)
            reports.write(f"{pid}\n")
            reports.flush()
    return 0


def _execute(command: list[str]) -> int:
    """In a forked child: execute the run `command` names (`dagster` + `command`), as a process of its own."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with open(os.devnull) as nothing:  # the lines for the next runs are not this run's
        os.dup2(nothing.fileno(), 0)
    from dagster._cli import main as dagster_main

    sys.argv = ["dagster", *command]
    try:
        dagster_main()
    except SystemExit as done:  # click ends the command this way
        return done.code if isinstance(done.code, int) else 0
    return 0


def _end(code: int) -> NoReturn:
    """End a run's process without the interpreter's teardown, which frees the run's whole heap one
    object at a time (~1.4 s of a core after the run has finished, while the next run starts on
    the other). The exit handlers still run: logging's flush, the Spark Connect client's release
    pool; the operating system takes the memory back at once."""
    try:
        atexit._run_exitfuncs()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _stop_release_pool() -> None:
    """Shut down the pool the Spark Connect client started at import, so that no Python thread is
    left to fork beside this one (a child would hold the pool without its threads, and nothing
    submitted to it would run). The client starts a new one when it finds none
    (`_initialize_pool_if_necessary`, in every execution's iterator)."""
    with contextlib.suppress(ImportError):
        from pyspark.sql.connect.client.reattach import ExecutePlanResponseReattachableIterator

        ExecutePlanResponseReattachableIterator.shutdown()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
