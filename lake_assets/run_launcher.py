"""The run launcher dagster.yaml names: a process per run, forked from one that imported the code.

Dagster's default launcher starts a run's process when the run is launched. On a 2-core
machine that process spends ~3.5 s importing Python, Dagster and its instance storage, the
code location and the Spark Connect client before the run's first step: most of the time from
a file landing to its rows in the table under `lake dev`. This launcher keeps one process
(`run_worker.py`) that has done those imports once, and hands it each run: it forks, and the
child executes the run as `dagster api execute_run` (the command Dagster's Docker, ECS and
Kubernetes launchers run), one run per process as before. No run's process imports anything the
code location needs, and no run shares the cores with the next one's imports
(`benchmarks/freshness.py` measures it against a process started at launch).

The waiting process imported the code as it was when it started: if a file of the code
location's package or a declaration has changed since (`LAKE_TABLES_DIR`), it is let go (its
stdin closed: it forks what it was handed, then ends) and a new one is started for the run, as
Dagster's default launcher would start one (`LAKE_PRESTART_RUNS=0`: a new one for every run).
Custom run launchers are Dagster's documented extension (`RunLauncher`); this one is the embedded
default's (`lake dev`, `lake demo`); Docker Compose and Kubernetes keep Dagster's own.
"""

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

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
class _Forker:
    """A `run_worker.py` process: it forks a process for each run line written to its stdin and
    reports the new process's PID, one line each, on `reports` (in the order the runs came)."""

    process: subprocess.Popen
    origin: Origin
    started: float
    reports: IO[str]
    handed: deque[str] = field(default_factory=deque)  # run IDs whose process it has not reported yet

    def hand(self, run_id: str, line: str) -> bool:
        """Give it a run (False: it has gone)."""
        if self.process.poll() is not None:
            return False
        try:
            assert self.process.stdin is not None
            self.handed.append(run_id)
            self.process.stdin.write(line)
            self.process.stdin.flush()
        except OSError:
            self.handed.pop()
            return False
        return True

    def let_go(self) -> None:
        """Close its stdin: it forks what it was handed, then ends; the runs it forked go on."""
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()


class PrestartedRunLauncher(RunLauncher, ConfigurableClass):
    """A run in a new process, forked from one that imported the code location before the run came."""

    def __init__(self, inst_data: ConfigurableClassData | None = None) -> None:
        self._inst_data = inst_data
        self._lock = threading.Lock()
        self._forker: _Forker | None = None
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
        self._hand(origin, run.run_id, json.dumps(command[command.index("api"):]) + "\n")

    def _hand(self, origin: Origin, run_id: str, line: str) -> _Forker:
        """Hand run `run_id` (its command `line`) to the waiting process for `origin`, or to a new one;
        keep that one waiting for the next run unless prestarting is off."""
        with self._lock:
            forker = self._take(origin)
            if not forker.hand(run_id, line):  # it died while waiting: start one for this run
                forker = self._start(origin)
                forker.hand(run_id, line)
            if self._prestarting and not self._disposed:
                self._forker = forker
            else:
                forker.let_go()
            return forker

    def _take(self, origin: Origin) -> _Forker:
        """The waiting process if it is for `origin`, alive and not older than the code; else a new one."""
        forker, self._forker = self._forker, None
        if forker is not None:
            if forker.origin == origin and forker.process.poll() is None and \
                    newest_change(origin.watched()) < forker.started:
                return forker
            forker.let_go()
        return self._start(origin)

    def _start(self, origin: Origin) -> _Forker:
        reading, writing = os.pipe()
        try:
            process = subprocess.Popen(self._command(origin, writing), stdin=subprocess.PIPE, text=True,
                                       cwd=origin.working_directory or None, pass_fds=(writing,))
        finally:
            os.close(writing)
        forker = _Forker(process, origin, time.time(), os.fdopen(reading))
        threading.Thread(target=self._record_processes, args=(forker,), daemon=True,
                         name=f"lake-runs-{process.pid}").start()
        return forker

    def _command(self, origin: Origin, reports: int) -> list[str]:
        """The waiting process's command line; it reports the processes it forks on descriptor `reports`."""
        return [origin.executable, "-m", WORKER_MODULE, origin.module, str(reports)]

    def _record_processes(self, forker: _Forker) -> None:
        """Tag each run with the process forked for it, as it is reported (for `terminate` from any
        process, the UI's included, and for reap_dead_runs); reap the forking process when it ends."""
        with forker.reports:
            for line in forker.reports:
                run_id = forker.handed.popleft()
                with contextlib.suppress(Exception):  # a run deleted meanwhile
                    self._instance.add_run_tags(run_id, process_tags(int(line)))
        forker.process.wait()

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
            forker, self._forker = self._forker, None
        if forker is not None:
            forker.let_go()
