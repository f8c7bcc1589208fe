"""The run launcher of the embedded default: a run's process is forked from one that imported the
code location before the run came; a waiting process older than the code is not used."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from lake_assets.core.processes import pid_alive
from lake_assets.run_launcher import Origin, PrestartedRunLauncher, _Forker, newest_change
from lake_assets.runs import PID_TAG, PROCESS_STARTED_TAG, process_tags
from lake_assets_tests.conftest import DATA
from lake_assets_tests.helpers.lake_dev import lake_dev, wait_for


def _package(root: Path) -> Path:
    package = root / "location"
    (package / "__pycache__").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "defs.py").write_text("")
    return package


@pytest.mark.unit
def test_the_newest_change_counts_sources_and_declarations_not_bytecode(tmp_path: Path) -> None:
    package = _package(tmp_path)
    unchanged = newest_change([package])
    assert unchanged >= os.stat(package / "defs.py").st_mtime
    time.sleep(0.02)
    (package / "__pycache__" / "defs.cpython-311.pyc").write_bytes(b"")
    (package / "notes.txt").write_text("not code")
    assert newest_change([package]) == unchanged
    time.sleep(0.02)
    (package / "defs.py").write_text("x = 1\n")
    changed = newest_change([package])
    assert changed > unchanged
    tables = tmp_path / "tables"
    tables.mkdir()
    time.sleep(0.02)
    (tables / "orders.yaml").write_text("name: orders\n")
    assert newest_change([package, tables]) > changed
    assert newest_change([package / "defs.py"]) == changed  # a root may be a file
    assert newest_change([tmp_path / "missing"]) == 0.0


@pytest.mark.unit
def test_the_code_location_and_the_declarations_are_watched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = _package(tmp_path)
    (tmp_path / "single.py").write_text("")
    monkeypatch.setenv("LAKE_TABLES_DIR", str(tmp_path / "tables"))
    assert Origin(sys.executable, str(tmp_path), "location.defs").watched() == [package, tmp_path / "tables"]
    assert Origin(sys.executable, str(tmp_path), "single").watched()[0] == tmp_path / "single.py"
    monkeypatch.delenv("LAKE_TABLES_DIR")
    installed = Origin(sys.executable, str(tmp_path), "lake_assets.definitions").watched()  # not in tmp: found installed
    assert installed == [Path(__file__).resolve().parents[1] / "lake_assets"]


#: A stand-in for a waiting process: for each line on stdin it reports a made-up process (this one's PID,
#: as a run's forked process would carry the worker's command line); it ends at EOF.
STAND_IN = "import os, sys\nwith os.fdopen(int(sys.argv[1]), 'w') as reports:\n" \
           "    for line in sys.stdin:\n        print(os.getpid(), file=reports, flush=True)\n"


class _StandIns(PrestartedRunLauncher):
    """The launcher with its waiting processes replaced by stand-ins (the rule under test is which
    process a run is handed to, not what the process runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[_Forker] = []

    def _start(self, origin: Origin) -> _Forker:
        forker = super()._start(origin)
        self.started.append(forker)
        return forker

    def _command(self, origin: Origin, reports: int) -> list[str]:
        return [sys.executable, "-c", STAND_IN, str(reports)]


def _ended(forker: _Forker) -> bool:
    return forker.process.wait(timeout=10) is not None


@pytest.mark.integration
def test_a_waiting_process_is_used_only_while_the_code_is_older_than_it(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAKE_TABLES_DIR", raising=False)
    package = _package(tmp_path)
    origin = Origin(sys.executable, str(tmp_path), "location.defs")
    launcher = _StandIns()
    try:
        waiting = launcher._hand(origin, "run-1", "[]\n")
        assert launcher._forker is waiting and waiting.process.poll() is None  # kept for the next run
        assert launcher._hand(origin, "run-2", "[]\n") is waiting  # nothing changed since it started
        (package / "defs.py").write_text("changed = True\n")  # the user edits the code location
        taken = launcher._hand(origin, "run-3", "[]\n")
        assert taken is not waiting and taken is launcher.started[-1]
        assert _ended(waiting)  # let go: it imported the old code
        other = launcher._hand(Origin(sys.executable, str(tmp_path), "other.defs"), "run-4", "[]\n")
        assert other is not taken and _ended(taken)  # a process for another code location is not this one's
    finally:
        launcher.dispose()
    assert launcher._forker is None
    assert all(_ended(forker) for forker in launcher.started)  # let go at dispose: nothing waits


@pytest.mark.unit
def test_every_module_a_waiting_process_imports_exists() -> None:
    """The warm-up skips an import that fails (the run then pays it): this catches a Dagster upgrade
    that moves one of the private modules it names, which would otherwise only make runs slower."""
    import importlib

    from dagster._cli import main

    from lake_assets.run_worker import WARM_MODULES

    assert callable(main)
    for name in WARM_MODULES:
        importlib.import_module(name)


@pytest.mark.integration
def test_with_prestart_off_every_run_gets_a_process_that_waits_for_no_other(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKE_PRESTART_RUNS", "0")
    launcher = _StandIns()
    origin = Origin(sys.executable, str(tmp_path), "location.defs")
    first = launcher._hand(origin, "run-1", "[]\n")
    second = launcher._hand(origin, "run-2", "[]\n")
    assert first is not second and launcher._forker is None
    assert _ended(first) and _ended(second)


@pytest.mark.integration
def test_a_waiting_process_that_died_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAKE_TABLES_DIR", raising=False)
    _package(tmp_path)
    origin = Origin(sys.executable, str(tmp_path), "location.defs")
    launcher = _StandIns()
    try:
        dead = launcher._hand(origin, "run-1", "[]\n")
        dead.process.kill()
        dead.process.wait()
        assert launcher._hand(origin, "run-2", "[]\n") is launcher.started[-1] is not dead
    finally:
        launcher.dispose()


@pytest.mark.integration
def test_each_run_is_forked_from_the_waiting_process_and_tagged_with_its_own(tmp_path: Path) -> None:
    """The real worker: it imports, then forks a process per line, which executes `dagster` with the
    line's arguments (here `--version`) and ends; the launcher tags each run with its process."""
    from dagster._core.test_utils import create_run_for_test

    (tmp_path / "location.py").write_text("")
    origin = Origin(sys.executable, str(tmp_path), "location")
    with dg.DagsterInstance.ephemeral() as instance:
        launcher = PrestartedRunLauncher()
        launcher.register_instance(instance)
        runs = [create_run_for_test(instance, job_name="apply_insurance") for _ in range(2)]
        try:
            for run in runs:
                forker = launcher._hand(origin, run.run_id, json.dumps(["--version"]) + "\n")
            def tagged() -> list[int] | None:
                stored = [instance.get_run_by_id(run.run_id) for run in runs]
                pids = [run.tags.get(PID_TAG) if run is not None else None for run in stored]
                return [int(pid) for pid in pids if pid] if all(pids) else None

            pids = wait_for(tagged, 120, "both runs' processes")
            assert len(set(pids)) == 2 and forker.process.pid not in pids  # a process of its own each
            wait_for(lambda: not any(pid_alive(pid) for pid in pids), 60, "the runs' processes to end")
            assert forker.process.poll() is None  # the worker waits for the next run
        finally:
            launcher.dispose()
        assert _ended(forker)


@pytest.mark.integration
def test_terminate_interrupts_the_process_the_runs_tags_name_from_any_process() -> None:
    from dagster._core.test_utils import create_run_for_test

    # a stand-in for a run's worker: it carries the worker's module name, as `terminate` checks
    worker = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.stdin.read(); time.sleep(60)",
                               "lake_assets.run_worker"], stdin=subprocess.PIPE, text=True)
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                             text=True)
    try:
        with dg.DagsterInstance.ephemeral() as instance:
            launcher = PrestartedRunLauncher()  # not the one that launched it, as in the webserver
            launcher.register_instance(instance)
            running = create_run_for_test(instance, job_name="apply_insurance", status=dg.DagsterRunStatus.STARTED,
                                          tags=process_tags(worker.pid))
            assert launcher.terminate(running.run_id)
            assert worker.wait(timeout=10) != 0  # Ctrl-C reached it
            stored = instance.get_run_by_id(running.run_id)
            assert stored is not None and stored.status == dg.DagsterRunStatus.CANCELING
            not_ours = create_run_for_test(instance, job_name="apply_insurance",
                                           status=dg.DagsterRunStatus.STARTED, tags=process_tags(other.pid))
            assert not launcher.terminate(not_ours.run_id)  # a process that is not a run worker is left alone
            assert other.poll() is None
            finished = create_run_for_test(instance, job_name="apply_insurance", status=dg.DagsterRunStatus.SUCCESS)
            assert not launcher.terminate(finished.run_id)
    finally:
        for process in (worker, other):
            process.kill()
            process.wait()


def _started_at(ticks: str) -> float:
    """A process start time from /proc (clock ticks since boot) as seconds since the epoch."""
    boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                if line.startswith("btime"))
    return boot + int(ticks) / os.sysconf("SC_CLK_TCK")


@pytest.mark.e2e
def test_under_lake_dev_a_run_after_the_first_is_forked_from_a_process_that_waited_for_it(tmp_path: Path) -> None:
    with lake_dev(tmp_path) as dev:
        assert dev.lake("put", str(DATA / "fullload" / "full-load.csv"), "--to", "fullload").returncode == 0
        wait_for(lambda: _runs(dev) and dev.idle(), 240, "the full load's run to end", interval=0.5)
        waiting = _waiting_workers(dev.home)
        assert dev.lake("put", str(DATA / "cdcload" / "20240401-090000000.csv"), "--to", "cdcload").returncode == 0
        wait_for(lambda: len(_runs(dev)) >= 2 and dev.idle(), 240, "the CDC file's run to end", interval=0.5)
        runs = _runs(dev)
        still = _waiting_workers(dev.home)
    first, second = runs[0], runs[1]
    assert [run.dagster_run.status for run in (first, second)] == [dg.DagsterRunStatus.SUCCESS] * 2
    # one process waited between the runs and still waits: the CDC run was handed to it, which
    # forked the run a process of its own, started at its launch (after the full load's end; the
    # boot time /proc gives is whole seconds)
    assert len(waiting) == 1 and still == waiting, (waiting, still)
    assert int(second.dagster_run.tags[PID_TAG]) not in waiting
    assert first.end_time is not None
    assert _started_at(second.dagster_run.tags[PROCESS_STARTED_TAG]) >= first.end_time - 1.0
    wait_for(lambda: not any(pid_alive(pid) for pid in still), 60, "the waiting process to end with lake dev")


def _runs(dev) -> list:
    previous = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(dev.home / "dagster")
    try:
        with dg.DagsterInstance.get() as instance:
            records = instance.get_run_records(dg.RunsFilter(job_name="apply_insurance"))
            return sorted(records, key=lambda record: record.create_timestamp)
    finally:
        if previous is None:
            del os.environ["DAGSTER_HOME"]
        else:
            os.environ["DAGSTER_HOME"] = previous


def _waiting_workers(home: Path) -> set[int]:
    """This lake's run workers alive that were not forked by one (a run's process may still be
    ending); another lake on the machine (a developer's `lake dev`) has workers of its own."""
    workers = {pid for pid in _worker_pids(home) if pid_alive(pid)}
    return {pid for pid in workers if _parent(pid) not in workers}


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _worker_pids(home: Path) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                command = Path(f"/proc/{entry}/cmdline").read_bytes()
                environment = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"lake_assets.run_worker" in command and f"LAKE_HOME={home}".encode() in environment:
                found.append(int(entry))
    return found
