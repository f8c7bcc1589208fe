"""The run coordinator tags a run of the implicit asset job with the table its assets are, and
launches a run nothing is ahead of at its submission.

A real Dagster instance loads the repository's dagster.yaml from DAGSTER_HOME, as `lake dev`'s
daemon and webserver do, with Dagster's recording launcher double in place of the lake's (a
launch here records the run and starts no process; the lake's launcher has its own tests);
runs of Dagster's implicit asset job (what the UI's Materialize button and the automation sensor
launch) are submitted through its coordinator, and the daemon's own queue logic says which it
would launch.
"""

import threading

from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.storage.tags import SENSOR_NAME_TAG
from dagster._core.test_utils import MockedRunLauncher, create_run_for_test
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from lake_assets.core import registry, scaffold
from lake_assets.run_coordinator import START_UNQUEUED, TableTaggingRunCoordinator, written_table
from lake_assets.runs import TABLE_TAG
from lake_assets_tests.helpers.run_queue import RECORDING_LAUNCHER, dequeued, repo_instance

REPO = Path(__file__).resolve().parents[1]
ASSET_JOB = "__ASSET_JOB"
INSURANCE = {dg.AssetKey(name) for name in ("insurance", "insurance_quarantine", "insurance_tombstones",
                                            "insurance_changes", "insurance_history")}

pytestmark = pytest.mark.unit


@pytest.fixture
def instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for instance in repo_instance(tmp_path, monkeypatch, launcher=RECORDING_LAUNCHER):
        assert isinstance(instance.run_coordinator, TableTaggingRunCoordinator)
        yield instance


def _created(instance: dg.DagsterInstance, keys: set[dg.AssetKey], tags: dict[str, str] | None = None,
             status: dg.DagsterRunStatus = dg.DagsterRunStatus.NOT_STARTED) -> dg.DagsterRun:
    """A run of the implicit asset job materializing `keys` (the UI's, unless `tags` name a sensor)."""
    origin = RemoteJobOrigin(RemoteRepositoryOrigin(
        InProcessCodeLocationOrigin(LoadableTargetOrigin(module_name="lake_assets.definitions")), "__repository__"),
        ASSET_JOB)
    return create_run_for_test(instance, job_name=ASSET_JOB, status=status,
                               tags=tags or {}, remote_job_origin=origin, asset_selection=frozenset(keys))


def _submit(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dg.DagsterRun:
    """Submit `run` as the UI and the sensor daemon do; the run as stored after."""
    instance.run_coordinator.submit_run(dg.SubmitRunContext(run, workspace=None))  # type: ignore[arg-type]
    stored = instance.get_run_by_id(run.run_id)
    assert stored is not None
    return stored


def _submitted(instance: dg.DagsterInstance, keys: set[dg.AssetKey], tags: dict[str, str] | None = None) -> dg.DagsterRun:
    """A run of the implicit asset job materializing `keys`, submitted with another run queued
    ahead of it (so it queues: the tagging is what these tests look at)."""
    ahead = _created(instance, INSURANCE, status=dg.DagsterRunStatus.QUEUED)
    stored = _submit(instance, _created(instance, keys, tags))
    assert stored.status == dg.DagsterRunStatus.QUEUED
    instance.delete_run(ahead.run_id)
    return stored


def _launched(instance: dg.DagsterInstance) -> list[str]:
    launcher = instance.run_launcher
    assert isinstance(launcher, MockedRunLauncher)
    return [run.run_id for run in launcher.queue()]



def test_a_run_of_a_declared_tables_assets_carries_its_table_and_waits_for_its_slot(
        instance: dg.DagsterInstance) -> None:
    writing = create_run_for_test(instance, job_name="apply_insurance", status=dg.DagsterRunStatus.STARTED,
                                  tags={TABLE_TAG: "insurance"})
    other = create_run_for_test(instance, job_name="load_tpcds", status=dg.DagsterRunStatus.STARTED,
                                tags={TABLE_TAG: "tpcds"})
    launched = _submitted(instance, INSURANCE)
    assert launched.tags[TABLE_TAG] == "insurance"
    assert dequeued(instance) == []  # one writer per table: it waits for the apply run
    instance.report_run_failed(other)
    assert dequeued(instance) == []  # another table's run ending does not free this table
    instance.report_run_failed(writing)
    assert dequeued(instance) == [launched.run_id]


def test_a_report_refresh_carries_the_star(instance: dg.DagsterInstance) -> None:
    keys = {dg.AssetKey(["tpcds", "report_q12"]), dg.AssetKey(["tpcds", "report_q41"])}
    assert _submitted(instance, keys).tags[TABLE_TAG] == "tpcds"


def test_a_run_of_two_tables_or_of_no_table_gets_no_tag(instance: dg.DagsterInstance) -> None:
    assert TABLE_TAG not in _submitted(instance, {dg.AssetKey("insurance"), dg.AssetKey(["tpcds", "report_q12"])}).tags
    assert written_table([dg.AssetKey("lake_ledger")]) is None
    assert written_table([dg.AssetKey(["raw", "insurance_cdc"])]) is None


def test_a_run_of_a_declared_iceberg_tables_assets_carries_its_table(
        instance: dg.DagsterInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An Iceberg table's asset is under its catalog namespace (`orders/orders`), its side tables' are not."""
    folder = tmp_path / "tables"
    folder.mkdir()
    sample = b"order_id,amount\n1,2.50\n"
    (folder / "orders.yaml").write_text(scaffold.render("orders", scaffold.guess(sample), "orders.csv", "iceberg"))
    monkeypatch.setenv(registry.TABLES_DIR_VARIABLE, str(folder))
    registry.declarations.cache_clear()
    try:
        keys = {dg.AssetKey(["orders", "orders"]), dg.AssetKey("orders_quarantine"), dg.AssetKey("orders_tombstones")}
        assert written_table(keys) == "orders.orders"  # its one name, as its apply job's tag and lease have it
        assert _submitted(instance, keys).tags[TABLE_TAG] == "orders.orders"
    finally:
        registry.declarations.cache_clear()


def test_a_tag_the_run_has_is_kept(instance: dg.DagsterInstance) -> None:
    assert _submitted(instance, {dg.AssetKey("insurance")}, tags={TABLE_TAG: "maintenance"}).tags[TABLE_TAG] == \
        "maintenance"


def _sensors(instance: dg.DagsterInstance, keys: set[dg.AssetKey]) -> dg.DagsterRun:
    return _created(instance, keys, tags={SENSOR_NAME_TAG: "raw_insurance_sensor"})


def test_a_sensors_run_nothing_is_ahead_of_is_launched_at_its_submission_with_its_tag(
        instance: dg.DagsterInstance) -> None:
    run = _submit(instance, _sensors(instance, INSURANCE))
    assert run.status == dg.DagsterRunStatus.STARTING
    assert _launched(instance) == [run.run_id]
    assert instance.run_launcher.queue()[0].tags[TABLE_TAG] == "insurance"  # type: ignore[attr-defined]


def test_a_run_whose_table_is_being_written_is_queued_not_launched(instance: dg.DagsterInstance) -> None:
    create_run_for_test(instance, job_name="apply_insurance", status=dg.DagsterRunStatus.STARTED,
                        tags={TABLE_TAG: "insurance"})
    run = _submit(instance, _sensors(instance, INSURANCE))
    assert run.status == dg.DagsterRunStatus.QUEUED
    assert _launched(instance) == []


def test_a_run_the_ui_submits_is_queued_for_the_daemon_to_launch(instance: dg.DagsterInstance) -> None:
    """The webserver keeps no run process waiting; the daemon's launcher does."""
    run = _submit(instance, _created(instance, INSURANCE))
    assert run.status == dg.DagsterRunStatus.QUEUED
    assert _launched(instance) == []
    assert dequeued(instance) == [run.run_id]


def test_a_run_queues_behind_a_queued_run_even_with_room(instance: dg.DagsterInstance) -> None:
    ahead = _created(instance, INSURANCE, tags={TABLE_TAG: "insurance"}, status=dg.DagsterRunStatus.QUEUED)
    run = _submit(instance, _sensors(instance, {dg.AssetKey("lake_ledger")}))  # no table, no tag limit
    assert run.status == dg.DagsterRunStatus.QUEUED
    assert _launched(instance) == []
    assert dequeued(instance) == [ahead.run_id, run.run_id]  # the queue keeps their order


def test_a_run_past_max_concurrent_runs_is_queued(instance: dg.DagsterInstance) -> None:
    limit = instance.run_coordinator.get_run_queue_config().max_concurrent_runs  # type: ignore[attr-defined]
    for _ in range(limit):
        create_run_for_test(instance, job_name="other", status=dg.DagsterRunStatus.STARTED)
    assert _submit(instance, _sensors(instance, {dg.AssetKey("lake_ledger")})).status == dg.DagsterRunStatus.QUEUED


def test_two_submissions_at_once_for_one_table_launch_one_and_queue_the_other(instance: dg.DagsterInstance) -> None:
    runs = [_sensors(instance, INSURANCE) for _ in range(2)]
    start = threading.Barrier(2)

    def submit(run: dg.DagsterRun) -> None:
        start.wait()
        instance.run_coordinator.submit_run(dg.SubmitRunContext(run, workspace=None))  # type: ignore[arg-type]

    threads = [threading.Thread(target=submit, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(instance.get_run_by_id(run.run_id).status.value for run in runs)  # type: ignore[union-attr]
    assert statuses == ["QUEUED", "STARTING"]
    assert len(_launched(instance)) == 1


def test_without_the_setting_every_run_is_queued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The deployments' dagster.yaml leave `start_unqueued_runs` out: their webserver and daemon
    share no directory for the submission lock."""
    deployed = yaml.safe_load((REPO / "deploy" / "dagster" / "dagster.yaml").read_text())["run_coordinator"]
    assert START_UNQUEUED not in deployed["config"]
    launcher = RECORDING_LAUNCHER + yaml.safe_dump({"run_coordinator": deployed})
    for instance in repo_instance(tmp_path, monkeypatch, launcher=launcher):
        run = _submit(instance, _sensors(instance, INSURANCE))
        assert run.status == dg.DagsterRunStatus.QUEUED
        assert _launched(instance) == []


def test_a_run_of_another_table_is_not_held_by_a_writing_table(instance: dg.DagsterInstance) -> None:
    """One writer per table, not one for the lake: a CDC file's run does not wait for the star's load."""
    create_run_for_test(instance, job_name="load_tpcds", status=dg.DagsterRunStatus.STARTED, tags={TABLE_TAG: "tpcds"})
    assert _submit(instance, _sensors(instance, INSURANCE)).status == dg.DagsterRunStatus.STARTING
