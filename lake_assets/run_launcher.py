"""A run launcher whose runs start warm: forked from a process that imported the code already.

Dagster's default launcher asks the code server to start each run in a *new interpreter*
(multiprocessing "spawn"), which imports Dagster, PySpark, delta-rs, pyiceberg and the
definitions again before the run does anything: 5-20 s on 2 cores, most of a CDC file's
time from landing to table. `WarmRunLauncher` runs each launched run in a process forked
from a multiprocessing *forkserver* that imported `preload_modules` once (the code location
and the libraries a run imports lazily, by default), so a run starts in milliseconds with
everything imported. Nothing is started in the forkserver before it forks (no threads,
engine or connections), so every run still gets its own engine session, S3 lease and
Dagster instance, exactly as before.

The run executes through Dagster's own `core_execute_run`, the function the code server
runs in its spawned process, and is interrupted the same way (SIGINT, which
`capture_interrupts` turns into Dagster's execution interruption).

Code (or report SQL) edited after the forkserver imported it would be stale in forked runs, so before each
launch the launcher compares the newest modification time of the preloaded packages' files
with the one it saw when the forkserver started; if code changed, that run and the next
ones start in a new interpreter (cold, but current) until the daemon is restarted.

With `LAKE_RUN_CONSOLE=0` (what a quiet `lake dev` sets) a warm run's process writes its
console output (Dagster's log lines at DEBUG) to `DAGSTER_HOME/run-console.log` instead of
the daemon's terminal; the run's event log, shown in the UI, is unchanged.

`LAKE_WARM_RUNS=0` hands every launch to Dagster's `DefaultRunLauncher` instead (the
freshness benchmark measures both in one run).
"""

import importlib.util
import multiprocessing
import os
import signal
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.events import EngineEventData
from dagster._core.launcher import DefaultRunLauncher, LaunchRunContext, RunLauncher
from dagster._serdes import ConfigurableClass, ConfigurableClassData
from dagster._utils.hosted_user_process import recon_job_from_origin

from lake_assets.daemon_tuning import pace_sensor_loop
from lake_assets.core.private_home import owner_only_umask
from lake_assets.runs import HOST_TAG, PID_TAG, bookkeeping_tag, process_gone, process_tags
from lake_assets.settings import LakeSettings

#: The code location, and what a run imports lazily (the Spark Connect client alone is 1.5-3.5 s):
#: importing these starts no thread, server or connection, so forking after them is safe.
DEFAULT_PRELOAD = ("lake_assets.definitions", "pyspark.sql.connect.session", "pyspark.sql.connect.functions",
                   "pysail.spark", "deltalake", "boto3.s3.transfer")
#: Where a run's console output goes when LAKE_RUN_CONSOLE=0 (under DAGSTER_HOME).
RUN_CONSOLE_LOG = "run-console.log"
#: Tag of runs this launcher executed itself ("1" warm, "0" cold), as opposed to the code server.
WARM_TAG = bookkeeping_tag("warm_start")


class WarmRunLauncher(RunLauncher, ConfigurableClass):
    """Launches each run in a process forked from a warm forkserver (see the module docstring)."""

    def __init__(self, preload_modules: Iterable[str] = DEFAULT_PRELOAD,
                 inst_data: ConfigurableClassData | None = None) -> None:
        self._inst_data = inst_data
        self._preload = list(preload_modules)
        self._processes: dict[str, multiprocessing.process.BaseProcess] = {}
        self._code_stamp: float | None = None  # newest source mtime when the forkserver started
        self._default = DefaultRunLauncher()  # LAKE_WARM_RUNS=0
        pace_sensor_loop(LakeSettings.from_env())  # in the daemon: sensors tick at the lake's interval
        super().__init__()

    def register_instance(self, instance: dg.DagsterInstance) -> None:
        super().register_instance(instance)
        self._default.register_instance(instance)

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> dict:
        return {"preload_modules": dg.Field([str], is_required=False, default_value=list(DEFAULT_PRELOAD))}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]) -> "WarmRunLauncher":
        return cls(preload_modules=config_value.get("preload_modules", DEFAULT_PRELOAD), inst_data=inst_data)

    def launch_run(self, context: LaunchRunContext) -> None:
        if not LakeSettings.from_env().warm_runs:
            self._default.launch_run(context)
            return
        run = context.dagster_run
        if run.job_code_origin is None:
            raise dg.DagsterInvariantViolationError(f"run {run.run_id} has no job code origin to execute")
        self._forget_finished()
        warm = self._warm_context_usable()
        mp_context = multiprocessing.get_context("forkserver") if warm else multiprocessing.get_context("spawn")
        process = mp_context.Process(
            target=execute_run_in_worker,
            args=(run.run_id, self._instance.get_ref(), recon_job_from_origin(run.job_code_origin), warm),
            name=f"dagster-run-{run.run_id[:8]}",
        )
        process.start()
        self._processes[run.run_id] = process

    def _warm_context_usable(self) -> bool:
        """Set the forkserver up on first use; False once the preloaded code changed on disk."""
        stamp = newest_source_mtime(self._preload)
        if self._code_stamp is None:
            multiprocessing.get_context("forkserver").set_forkserver_preload(self._preload)
            self._code_stamp = stamp
        return stamp <= self._code_stamp

    def _forget_finished(self) -> None:
        for run_id, process in list(self._processes.items()):
            if not process.is_alive():
                process.join(0)
                process.close()
                del self._processes[run_id]

    def terminate(self, run_id: str) -> bool:
        """Interrupt a run from any process (the UI's webserver, the daemon, `lake`).

        A warm run's worker tagged the run with its pid, host and start time; it gets SIGINT,
        which Dagster's run workers turn into an interruption. A run launched cold went
        through the code server, which terminates it.
        """
        run = self._instance.get_run_by_id(run_id)
        if not run or run.is_finished:
            return False
        if run.tags.get(WARM_TAG) is None:
            return self._default.terminate(run_id)
        self._instance.report_run_canceling(run)
        if process_gone(run.tags) or run.tags.get(HOST_TAG) != socket.gethostname():
            self._instance.report_engine_event(
                "The run's process is gone or on another host; it cannot be interrupted from here.",
                run, cls=self.__class__)
            return False
        os.kill(int(run.tags[PID_TAG]), signal.SIGINT)
        return True

    def join(self, timeout: int = 30) -> None:
        for process in list(self._processes.values()):
            process.join(timeout)
        self._default.join(timeout)

    def dispose(self) -> None:
        self._default.dispose()


def execute_run_in_worker(run_id: str, instance_ref: Any, recon_job: Any, warm: bool) -> None:
    """Body of a launched run's process: execute the run as Dagster's run worker does (owner-only files)."""
    owner_only_umask()
    from dagster._grpc.impl import core_execute_run
    from dagster._utils.interrupts import capture_interrupts

    with capture_interrupts(), dg.DagsterInstance.from_ref(instance_ref) as instance:
        run = instance.get_run_by_id(run_id)
        if run is None:
            return
        if not LakeSettings.from_env().run_console:
            _console_to(Path(instance.root_directory) / RUN_CONSOLE_LOG)
        pid = os.getpid()
        instance.add_run_tags(run_id, {WARM_TAG: "1" if warm else "0", **process_tags()})
        start = "forked from the warm forkserver" if warm else "in a new interpreter (code changed since the forkserver started)"
        instance.report_engine_event(f"Started process for run (pid: {pid}), {start}.", run,
                                     EngineEventData.in_process(pid))
        try:
            for _ in core_execute_run(recon_job, run, instance, inject_env_vars=False):
                pass
        except Exception:  # noqa: BLE001 - core_execute_run has logged it and failed the run
            pass
        finally:
            instance.report_engine_event(f"Process for run exited (pid: {pid}).", run)


def _console_to(path: Path) -> None:
    """Send this process's stdout and stderr (file descriptors 1 and 2) to the end of `path`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)


#: Files whose edit makes a forked run stale: modules, and the report SQL they read at import.
SOURCE_SUFFIXES = {".py", ".sql"}


def newest_source_mtime(modules: Iterable[str]) -> float:
    """The newest modification time of the source files (code and the SQL of the reports,
    read at import) of the project packages among `modules`.

    Installed libraries (under site-packages) are left out: they do not change under a running
    daemon, and walking them on every launch would cost more than the check is worth.
    """
    newest = 0.0
    for top in {name.split(".")[0] for name in modules}:
        found = importlib.util.find_spec(top)
        if found is None or found.origin is None or "site-packages" in Path(found.origin).parts:
            continue
        for path in Path(found.origin).parent.rglob("*"):
            if path.suffix not in SOURCE_SUFFIXES:
                continue
            try:
                newest = max(newest, path.stat().st_mtime)
            except OSError:
                continue
    return newest
