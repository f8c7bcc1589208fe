"""The warm run launcher executes real runs in processes forked from a preloaded forkserver."""

import os
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.reconstruct import ReconstructableJob

from lake_assets.run_launcher import WarmRunLauncher, newest_source_mtime
from lake_assets_tests.helpers import warm_jobs

HELPER = "lake_assets_tests.helpers.warm_jobs"


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    """A real sqlite Dagster instance whose run launcher is the warm one, preloading the test jobs."""
    launcher = {"module": "lake_assets.run_launcher", "class": "WarmRunLauncher",
                "config": {"preload_modules": [HELPER]}}
    with dg.instance_for_test(temp_dir=str(tmp_path), overrides={"run_launcher": launcher}) as test_instance:
        yield test_instance


def launch(instance: dg.DagsterInstance, job_name: str) -> str:
    recon = ReconstructableJob.for_module(HELPER, job_name)
    run = instance.create_run_for_job(job_def=recon.get_definition(), job_code_origin=recon.get_python_origin())
    instance.launch_run(run.run_id, workspace=None)
    return run.run_id


def wait_until_finished(instance: dg.DagsterInstance, run_id: str, timeout: float = 120) -> dg.DagsterRun:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = instance.get_run_by_id(run_id)
        if run is not None and run.is_finished:
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} did not finish in {timeout} s")


def observation(instance: dg.DagsterInstance, run_id: str) -> dict:
    [event] = [e for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_OBSERVATION)]
    return {k: v.value for k, v in event.dagster_event.asset_observation_data.asset_observation.metadata.items()}


@pytest.mark.integration
def test_runs_execute_in_processes_forked_from_the_preloaded_forkserver(instance: dg.DagsterInstance) -> None:
    assert isinstance(instance.run_launcher, WarmRunLauncher)
    first, second = launch(instance, "probe_job"), launch(instance, "probe_job")
    for run_id in (first, second):
        assert wait_until_finished(instance, run_id).status == dg.DagsterRunStatus.SUCCESS
    seen = [observation(instance, run_id) for run_id in (first, second)]
    # each run has its own process, not this one; the module was imported once, before they forked
    assert len({s["running_pid"] for s in seen} | {os.getpid()}) == 3
    assert seen[0]["imported_by_pid"] == seen[1]["imported_by_pid"]
    assert all(s["imported_by_pid"] != s["running_pid"] for s in seen)
    messages = [e.message for e in instance.all_logs(first, of_type=dg.DagsterEventType.ENGINE_EVENT)]
    assert any("forked from the warm forkserver" in (m or "") for m in messages)


@pytest.mark.integration
def test_terminate_from_another_process_interrupts_the_run(instance: dg.DagsterInstance) -> None:
    run_id = launch(instance, "sleeping_job")
    deadline = time.monotonic() + 60
    while instance.get_run_by_id(run_id).status != dg.DagsterRunStatus.STARTED:
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.2)
    # the UI's Terminate runs in the webserver: a launcher that did not start the run
    with dg.DagsterInstance.from_ref(instance.get_ref()) as webserver:
        assert webserver.run_launcher is not instance.run_launcher
        assert webserver.run_launcher.terminate(run_id)
    assert wait_until_finished(instance, run_id, timeout=60).status == dg.DagsterRunStatus.CANCELED


@pytest.mark.integration
def test_changed_code_starts_runs_in_a_new_interpreter(instance: dg.DagsterInstance) -> None:
    assert wait_until_finished(instance, launch(instance, "probe_job")).status == dg.DagsterRunStatus.SUCCESS
    source = Path(warm_jobs.__file__)
    before = source.stat()
    os.utime(source, (before.st_atime, time.time() + 1))  # saved after the forkserver imported it
    try:
        run_id = launch(instance, "probe_job")
    finally:
        os.utime(source, (before.st_atime, before.st_mtime))
    assert wait_until_finished(instance, run_id).status == dg.DagsterRunStatus.SUCCESS
    seen = observation(instance, run_id)
    assert seen["imported_by_pid"] == seen["running_pid"]  # imported afresh in the run's own interpreter


def test_the_daemon_sensor_loop_follows_the_lake_sensor_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    import dagster._daemon.sensor as sensor_daemon

    from lake_assets.daemon_tuning import pace_sensor_loop
    from lake_assets.settings import LakeSettings

    assert sensor_daemon.MIN_INTERVAL_LOOP_TIME is not None  # still where Dagster keeps it
    monkeypatch.setattr(sensor_daemon, "MIN_INTERVAL_LOOP_TIME", 5)
    monkeypatch.setenv("LAKE_SENSOR_INTERVAL_SECONDS", "2")
    WarmRunLauncher()  # what the daemon builds from dagster.yaml
    assert sensor_daemon.MIN_INTERVAL_LOOP_TIME == 2
    monkeypatch.setenv("LAKE_SENSOR_INTERVAL_SECONDS", "30")
    assert pace_sensor_loop(LakeSettings.from_env()) == 5  # never slower than Dagster's own loop


def test_an_edited_report_sql_makes_forked_code_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Report SQL is read when its module is imported, so editing it must count as a code change."""
    package = tmp_path / "edited_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    sql = package / "q.sql"
    sql.write_text("SELECT 1")
    monkeypatch.syspath_prepend(str(tmp_path))
    os.utime(package / "__init__.py", (1_000, 1_000))
    os.utime(sql, (2_000, 2_000))
    before = newest_source_mtime(["edited_pkg"])
    os.utime(sql, (3_000, 3_000))
    assert (before, newest_source_mtime(["edited_pkg"])) == (2_000, 3_000)


def _sensor_evaluations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seconds: float) -> int:
    """How often the real sensor daemon loop evaluates a 1-second sensor in `seconds`."""
    import logging
    import threading

    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.test_utils import InProcessTestWorkspaceLoadTarget
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._daemon.sensor import execute_sensor_iteration_loop

    from lake_assets_tests.helpers.ticking_sensor import TICKS_FILE

    ticks = tmp_path / f"ticks-{time.monotonic_ns()}"
    ticks.touch()
    monkeypatch.setenv(TICKS_FILE, str(ticks))
    origin = InProcessCodeLocationOrigin(LoadableTargetOrigin(module_name="lake_assets_tests.helpers.ticking_sensor",
                                                              attribute="defs"))
    home = tmp_path / f"instance-{time.monotonic_ns()}"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance, \
            WorkspaceProcessContext(instance, InProcessTestWorkspaceLoadTarget(origin)) as workspace:
        for _ in execute_sensor_iteration_loop(workspace, logging.getLogger("sensor-loop-test"), threading.Event(),
                                               until=time.time() + seconds):
            pass
    return len(ticks.read_text().splitlines())


@pytest.mark.integration  # 20 s of a real daemon loop
def test_dagster_still_paces_its_sensor_loop_by_the_constant_the_lake_sets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The seam's behaviour, not only its name: the real daemon loop evaluates a 1-second sensor
    about once a second once the lake has paced it, and about every 5 s with Dagster's default."""
    import dagster._daemon.sensor as sensor_daemon

    monkeypatch.setattr(sensor_daemon, "MIN_INTERVAL_LOOP_TIME", 5)
    default = _sensor_evaluations(tmp_path, monkeypatch, 10)
    monkeypatch.setenv("LAKE_SENSOR_INTERVAL_SECONDS", "1")
    WarmRunLauncher()  # what the daemon builds from dagster.yaml: it paces the loop
    paced = _sensor_evaluations(tmp_path, monkeypatch, 10)
    assert default <= 3 and paced >= 5, (default, paced)
