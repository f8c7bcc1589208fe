"""A run worker started before its run: `python -m lake_assets.run_worker MODULE`.

It imports what every run of the code location imports before its first step (Dagster and
its instance storage, the code location MODULE, the Spark Connect client and pandas: ~3.5 s
on a 2-core machine), then waits for one line on stdin, the serialized `ExecuteRunArgs` of
its run's command line after `dagster` (`["api", "execute_run", ARGS]`: the command Dagster's
container launchers run, as JSON), and executes it in this process. One run per process, as with Dagster's default launcher; only
the imports happened before the run was asked for. EOF before a line (the launcher has gone)
ends it with nothing done.

A warm-up import that fails is left for the run to meet: `execute_run` imports the code location
again and reports its error on the run, as in a process started cold.
"""

import contextlib
import importlib
import json
import signal
import sys

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
    warm(argv[0])
    line = sys.stdin.readline().strip()
    if not line:
        return 0
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from dagster._cli import main as dagster_main

    sys.argv = ["dagster", *json.loads(line)]
    try:
        dagster_main()
    except SystemExit as done:  # click ends the command this way
        return done.code if isinstance(done.code, int) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
