"""A run killed mid-apply, for the model tests: a real SIGKILL at a seam of the apply.

`killed(...)` runs this module in a child process on the test's bucket and Spark Connect
server. The child wraps one seam (a function the apply calls at a known point) so that the
process SIGKILLs itself there: no `except`, `finally` or thread gets to run, exactly as when
the machine or an operator kills a run. Seams:

- `stage`: just after a declared table's run records its manifest in its stage, before its table
  commit (core/apply/stage.py);
- `table-commit`: just after the table's commit returns (a declared table: the engine's
  commit, core/apply/commit.py, or an Iceberg one's, core/apply/curated_iceberg.py; before the
  feed, tombstones, history and ledger);
- `tombstones`: just after the tombstones are written, before the table commit (TPC-DS);
- `ledger`: at the ledger write, the apply's last step (everything else is written).

The hook lives here, in the tests: production code has no kill switch.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any

from lake_assets.resources.spark import SparkConfig, _sail_url
from lake_assets.resources.storage import LakeStorage

#: SIGKILL's exit code as subprocess reports it.
KILLED = -signal.SIGKILL


def killed(storage: LakeStorage, work: str, seam: str, *arguments: str) -> int:
    """Run `work` (see `_work`) in a child killed at `seam`; its exit code (KILLED, or 0 if
    the run never reached the seam, e.g. it had nothing to commit)."""
    remote = _sail_url(storage, SparkConfig().sail)  # the test process's Sail server
    env = {**os.environ, "KILLED_RUN_BUCKET": storage.bucket, "KILLED_RUN_HOME": storage.home,
           "KILLED_RUN_ENDPOINT": storage.endpoint_url, "KILLED_RUN_REMOTE": remote}
    done = subprocess.run([sys.executable, "-m", __name__, work, seam, *arguments], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode in (0, KILLED), done.stderr[-3000:]
    return done.returncode


def _die_after(function: Callable[..., Any]) -> Callable[..., Any]:
    def then_die(*args: Any, **kwargs: Any) -> Any:
        function(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    return then_die


def _die_at(function: Callable[..., Any]) -> Callable[..., Any]:
    def die(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGKILL)
    return die


def _arm(seam: str) -> None:
    from lake_assets.core.apply import commit
    from lake_assets.core.apply.curated_iceberg import IcebergCurated
    from lake_assets.core.apply.stage import Stage
    from lake_assets.core.ledger import Ledger
    from lake_assets.tpcds import apply

    if seam == "stage":
        Stage.record = _die_after(Stage.record)  # type: ignore[method-assign]
    elif seam == "table-commit":
        commit.commit = _die_after(commit.commit)
        IcebergCurated.commit = _die_after(IcebergCurated.commit)  # type: ignore[method-assign]
    elif seam == "tombstones":
        apply._record_tombstones = _die_after(apply._record_tombstones)
    elif seam == "ledger":
        Ledger.record = _die_at(Ledger.record)  # type: ignore[method-assign]
    else:
        raise ValueError(seam)


def _work(storage: LakeStorage, work: str, arguments: list[str]) -> None:
    """insurance [reapply] | corrections [reapply] | days DAY... (ISO dates; `null` for no date) |
    declared PATH (a declaration file)."""
    import datetime as dt

    spark = SparkConfig(engine="remote", remote=os.environ["KILLED_RUN_REMOTE"]).session(storage)
    if work == "insurance":
        from lake_assets_tests.helpers.insurance import apply_pending
        apply_pending(storage, spark, "killed-run", reapply="reapply" in arguments)
    elif work == "corrections":
        from lake_assets.tpcds.corrections import apply_corrections
        apply_corrections(storage, spark, "killed-run", reapply="reapply" in arguments)
    elif work == "declared":
        from lake_assets.core.apply.run import apply_pending
        from lake_assets.core.registry import read_file
        apply_pending(read_file(Path(arguments[0])), storage, spark, "killed-run")
    elif work == "days":
        from lake_assets.tpcds.load import load_fact_days
        load_fact_days(storage, spark, [None if a == "null" else dt.date.fromisoformat(a) for a in arguments],
                       "killed-run")
    else:
        raise ValueError(work)


if __name__ == "__main__":
    work_name, seam_name, *rest = sys.argv[1:]
    lake = LakeStorage(bucket=os.environ["KILLED_RUN_BUCKET"], home=os.environ["KILLED_RUN_HOME"]) \
        .with_endpoint(os.environ["KILLED_RUN_ENDPOINT"])
    _arm(seam_name)
    _work(lake, work_name, rest)
    print(Path(__file__).name, "finished without reaching", seam_name)
