"""The `lake` command: one module per command group, registered on one Typer app."""

import atexit
import os
import sys
import warnings

# Dagster flags beta APIs (observable sources, backfill policies) when definitions are
# imported; that is for developers, not for the terminal of someone running `lake`.
warnings.filterwarnings("ignore", module=r"dagster(\.|$)")

from lake_assets.cli import approve, backfill, changes, dev, engine, maintain, query, raw, restore, run, snapshots, status, tables, tpcds  # noqa: E402, F401 - importing registers the commands
from lake_assets.cli.app import app  # noqa: E402

__all__ = ["app", "main"]


def main() -> None:
    """Run the command, then leave without finalizing the interpreter.

    Native threads (gRPC's under the Spark Connect client, Arrow's and delta-rs's pools) still
    alive when the interpreter finalizes can unwind into it and abort the process (`terminate
    called without an active exception`, exit -6) after all its work was done and reported:
    `lake run` did so once in CI. So the command's exit handlers run (the Spark Connect
    client's release pool waits for what it holds: resources/spark.py), the output is flushed,
    and the process ends with the command's exit code, with no finalization for such a thread
    to abort."""
    code: int | str | None = 0
    try:
        app()
    except SystemExit as done:
        code = done.code
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    if isinstance(code, str):
        print(code, file=sys.stderr, flush=True)
        code = 1
    os._exit(code or 0)
