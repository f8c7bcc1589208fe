"""The run launcher dagster.yaml names: a new process per run, started before the run is.

Dagster's default launcher starts a run's process when the run is launched. On a 2-core
machine that process spends ~3.5 s importing Python, Dagster and its instance storage, the
code location and the Spark Connect client before the run's first step: most of the time from
a file landing to its rows in the table under `lake dev`. This launcher keeps one process
(`run_worker.py`) that has done those imports waiting, hands the next run to it, and starts
the next waiting process at once, while that run works (its imports compete with the run for
the cores, but are done by the time a file lands after it: `benchmarks/freshness.py`). The run executes as `dagster api execute_run` (the command Dagster's
Docker, ECS and Kubernetes launchers run), one run per process as before.

A waiting process imported the code as it was when it started: if a file of the code
location's package or a declaration has changed since (`LAKE_TABLES_DIR`), it is discarded and
the run gets a process started for it, as Dagster's default launcher would start one
(`LAKE_PRESTART_RUNS=0`: always so). Custom
run launchers are Dagster's documented extension (`RunLauncher`); this one is the embedded
default's (`lake dev`, `lake demo`); Docker Compose and Kubernetes keep Dagster's own.
"""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.launcher import LaunchRunContext, RunLauncher
from dagster._grpc.types import ExecuteRunArgs
from dagster._serdes import ConfigurableClass, ConfigurableClassData

from lake_assets.core.processes import command_line
from lake_assets.core.registry import TABLES_DIR_VARIABLE
from lake_assets.runs import PID_TAG, process_gone, process_tags
from lake_assets.settings import LakeSettings

WORKER_MODULE = "lake_assets.run_worker"


@dataclass(frozen=True)
class Origin:
    """Where a run's code comes from: the interpreter, the working directory and the module."""

    executable: str
    working_directory: str | None
    module: str

    @classmethod
    def of(cls, run: dg.DagsterRun) -> "Origin":
        origin = run.job_code_origin
        assert origin is not None, "a launched run has a code origin"
        pointer = origin.repository_origin.code_pointer
        return cls(origin.executable_path or sys.executable, getattr(pointer, "working_directory", None),
                   getattr(pointer, "module", None) or getattr(pointer, "python_file", None) or "")

    def watched(self) -> list[Path]:
        """The files whose change makes a waiting process stale: the code location's package or
        module (in the working directory, else where this interpreter finds it) and the
        declarations' directory."""
        top = self.module.split(".")[0]
        base = Path(self.working_directory or os.getcwd())
        roots = [path for path in (base / top, base / f"{top}.py") if path.exists()]
        if not roots and top:
            spec = importlib.util.find_spec(top)
            if spec is not None:
                roots = [Path(p) for p in spec.submodule_search_locations or ([spec.origin] if spec.origin else [])]
        tables = os.environ.get(TABLES_DIR_VARIABLE)
        if tables:
            roots.append(Path(tables))
        return roots


def newest_change(roots: list[Path]) -> float:
    """The latest change (modification or status) of a source or declaration file under `roots`,
    directories or files (0 if none)."""
    newest = 0.0
    stack = [str(root) for root in roots]
    while stack:
        path = stack.pop()
        try:
            entries = list(os.scandir(path)) if os.path.isdir(path) else [_File(path)]
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    stack.append(entry.path)
            elif entry.name.endswith((".py", ".yaml", ".yml")):
                try:
                    status = entry.stat()
                except OSError:
                    continue
                newest = max(newest, status.st_mtime, status.st_ctime)
    return newest


@dataclass(frozen=True)
class _File:
    """A root that is a file, shaped like the `os.DirEntry` the walk reads."""

    path: str

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def is_dir(self, follow_symlinks: bool = True) -> bool:
        return False

    def stat(self) -> os.stat_result:
        return os.stat(self.path)


@dataclass
class _Waiting:
    process: subprocess.Popen
    origin: Origin
    started: float


class PrestartedRunLauncher(RunLauncher, ConfigurableClass):
    """A run in a new process that started, and imported the code location, before the run did."""

    def __init__(self, inst_data: ConfigurableClassData | None = None) -> None:
        self._inst_data = inst_data
        self._lock = threading.Lock()
        self._waiting: _Waiting | None = None
        self._disposed = False
        self._prestarting = LakeSettings.from_env().prestart_runs
        super().__init__()

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> dict:
        return {}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]) -> "PrestartedRunLauncher":
        return cls(inst_data=inst_data)

    # --- launching ---------------------------------------------------------------------------

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        origin = Origin.of(run)
        assert run.job_code_origin is not None
        command = ExecuteRunArgs(job_origin=run.job_code_origin, run_id=run.run_id,
                                 instance_ref=self._instance.get_ref()).get_command_args()
        handed = json.dumps(command[command.index("api"):]) + "\n"
        process = self._take(origin)
        try:
            assert process.stdin is not None
            process.stdin.write(handed)
            process.stdin.close()
        except OSError:  # it died while waiting: start one for this run
            process = self._start(origin)
            assert process.stdin is not None
            process.stdin.write(handed)
            process.stdin.close()
        # where it runs, for `terminate` from any process (the UI's) and for reap_dead_runs
        self._instance.add_run_tags(run.run_id, process_tags(process.pid))
        threading.Thread(target=process.wait, daemon=True, name=f"lake-run-{run.run_id[:8]}").start()  # reaps it
        self._prestart(origin)

    def _take(self, origin: Origin) -> subprocess.Popen:
        """The waiting process if it is for `origin`, alive and not older than the code; else a new one."""
        with self._lock:
            waiting, self._waiting = self._waiting, None
        if waiting is not None:
            fresh = waiting.origin == origin and waiting.process.poll() is None and \
                newest_change(origin.watched()) < waiting.started
            if fresh:
                return waiting.process
            _discard(waiting.process)
        return self._start(origin)

    def _start(self, origin: Origin) -> subprocess.Popen:
        return subprocess.Popen([origin.executable, "-m", WORKER_MODULE, origin.module], stdin=subprocess.PIPE,
                                text=True, cwd=origin.working_directory or None)

    def _prestart(self, origin: Origin) -> None:
        """Start the next run's process now, while this run works: its imports are done by the time a
        file lands after this run (measured with `benchmarks/freshness.py`)."""
        with self._lock:
            if self._waiting is not None or self._disposed or not self._prestarting:
                return
            started = time.time()
            self._waiting = _Waiting(self._start(origin), origin, started)

    # --- stopping --------------------------------------------------------------------------------

    def terminate(self, run_id: str) -> bool:
        """Cancel a run: mark it canceling and interrupt its process (Ctrl-C: Dagster's run worker
        stops at its next event and records the run canceled). Any process may ask (the UI's
        webserver does): the run's tags name its process."""
        run = self._instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return False
        pid = run.tags.get(PID_TAG, "")
        if not pid.isdigit() or process_gone(run.tags) or WORKER_MODULE not in command_line(int(pid)):
            return False
        self._instance.report_run_canceling(run)
        os.kill(int(pid), signal.SIGINT)
        return True

    def dispose(self) -> None:
        with self._lock:
            self._disposed = True
            waiting, self._waiting = self._waiting, None
        if waiting is not None:
            _discard(waiting.process)


def _discard(process: subprocess.Popen) -> None:
    """Stop a waiting process: it holds no run, only imports."""
    process.kill()
    process.wait()
    if process.stdin is not None:
        process.stdin.close()
