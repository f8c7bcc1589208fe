"""A killed run must not block the lake: dead runs are failed and the queue moves (issue 5, point 5)."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.storage.tags import TagType, get_tag_type
from dagster._core.test_utils import create_run_for_test
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from lake_assets.runs import TABLE_TAG
from lake_assets_tests.helpers.run_queue import dequeued, repo_instance
from lake_assets.runs import (CODE_LOCATION, HOST_TAG, PID_TAG, PROCESS_STARTED_TAG, location_tags, process_tags,
                              reap_dead_runs)
from lake_assets.declared.sensors import FIRST_OBJECT_TAG, LAST_OBJECT_TAG, OBJECTS_TAG

REPO = Path(__file__).resolve().parents[1]

#: A `lake run` stand-in: an in-process run of a job holding the insurance slot, that hangs.
HANGING_RUN = textwrap.dedent("""
    import sys, time
    import dagster as dg
    from lake_assets.runs import process_tags

    @dg.op
    def hang() -> None:
        print("running", flush=True)
        time.sleep(600)

    @dg.job(tags={"lake/table": "insurance"})
    def apply_insurance():
        hang()

    apply_insurance.execute_in_process(instance=dg.DagsterInstance.get(), tags=process_tags())
""")


@pytest.fixture
def instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    yield from repo_instance(tmp_path, monkeypatch)


@dg.op
def noop() -> None:
    pass


@dg.job(tags={TABLE_TAG: "insurance"})
def queued_job() -> None:
    noop()



@pytest.mark.integration
def test_a_killed_run_is_failed_and_the_queued_run_proceeds(instance: dg.DagsterInstance, tmp_path: Path) -> None:
    script = tmp_path / "hanging_run.py"
    script.write_text(HANGING_RUN)
    child = subprocess.Popen([sys.executable, str(script)], env=os.environ.copy(), cwd=REPO,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "running"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    [killed] = instance.get_run_records(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
    assert killed.dagster_run.tags[PID_TAG] == str(child.pid)

    origin = RemoteJobOrigin(RemoteRepositoryOrigin(
        InProcessCodeLocationOrigin(LoadableTargetOrigin(python_file=__file__)), "__repository__"), "queued_job")
    queued = create_run_for_test(instance, job_name="queued_job", status=dg.DagsterRunStatus.QUEUED,
                                 tags={TABLE_TAG: "insurance"}, remote_job_origin=origin)  # as a sensor's request
    assert instance.get_run_by_id(queued.run_id).status == dg.DagsterRunStatus.QUEUED
    assert dequeued(instance) == []  # the dead run holds the insurance slot: the queue is stuck

    assert reap_dead_runs(instance) == [killed.dagster_run.run_id]
    failed = instance.get_run_by_id(killed.dagster_run.run_id)
    assert failed.status == dg.DagsterRunStatus.FAILURE
    assert dequeued(instance) == [queued.run_id]  # work resumes
    assert reap_dead_runs(instance) == []


def test_live_and_foreign_runs_are_left_alone(instance: dg.DagsterInstance) -> None:
    mine = instance.create_run_for_job(queued_job, status=dg.DagsterRunStatus.STARTED, tags=process_tags())
    elsewhere = instance.create_run_for_job(queued_job, status=dg.DagsterRunStatus.STARTED,
                                            tags={**process_tags(), HOST_TAG: "another-host", PID_TAG: "999999"})
    untagged = instance.create_run_for_job(queued_job, status=dg.DagsterRunStatus.STARTED)
    reused = instance.create_run_for_job(queued_job, status=dg.DagsterRunStatus.STARTED,
                                         tags={**process_tags(), PROCESS_STARTED_TAG: "1"})  # our pid, not us
    assert reap_dead_runs(instance) == [reused.run_id]
    for run in (mine, elsewhere, untagged):
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED


def test_dagster_yaml_enables_run_monitoring(instance: dg.DagsterInstance) -> None:
    assert instance.run_monitoring_enabled
    assert instance.run_monitoring_start_timeout_seconds > 0


def test_bookkeeping_tags_are_hidden_and_still_select_runs(instance: dg.DagsterInstance) -> None:
    """The UI's API drops HIDDEN tags (the function it calls decides); a person keeps table and file count."""
    bookkeeping = [*process_tags(), FIRST_OBJECT_TAG, LAST_OBJECT_TAG]
    assert {get_tag_type(key) for key in bookkeeping} == {TagType.HIDDEN}
    assert {get_tag_type(key) for key in (TABLE_TAG, OBJECTS_TAG, "lake/launched_by")} == {TagType.USER_PROVIDED}
    run = instance.create_run_for_job(queued_job, status=dg.DagsterRunStatus.STARTED, tags=process_tags())
    found = instance.get_run_records(filters=dg.RunsFilter(tags={PID_TAG: str(os.getpid())}))
    assert [record.dagster_run.run_id for record in found] == [run.run_id]


def test_the_cli_runs_location_tag_names_the_workspaces_code_location() -> None:
    """`location_tags()` must name the location every workspace loads the lake as, or the CLI's
    runs vanish from the job pages again."""
    import tomllib

    import yaml

    root = Path(__file__).resolve().parents[1]
    (location,) = yaml.safe_load((root / "workspace.yaml").read_text())["load_from"]
    configured = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["dagster"]["code_location_name"]
    assert location["python_module"]["location_name"] == configured == CODE_LOCATION
    # the label Dagster gives a run launched from that location (dagster_run.py `tags_for_storage`)
    origin = RemoteRepositoryOrigin(InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name="lake_assets.definitions"), location_name=CODE_LOCATION), "__repository__")
    stored = create_run_for_test(dg.DagsterInstance.ephemeral(), job_name="apply_insurance",
                                 remote_job_origin=RemoteJobOrigin(origin, "apply_insurance"))
    assert location_tags() == {key: value for key, value in stored.tags_for_storage().items()
                               if key == ".dagster/repository"}
