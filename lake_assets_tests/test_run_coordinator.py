"""The run coordinator tags a run of the implicit asset job with the table its assets are.

A real Dagster instance loads the repository's dagster.yaml from DAGSTER_HOME, as `lake dev`'s
daemon and webserver do; runs of Dagster's implicit asset job (what the UI's Materialize button
and the automation sensor launch) are submitted through its coordinator, and the daemon's own
queue logic says which it would launch.
"""

from pathlib import Path

import dagster as dg
import pytest
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.test_utils import create_run_for_test
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from lake_assets.run_coordinator import TableTaggingRunCoordinator, written_table
from lake_assets.runs import TABLE_TAG
from lake_assets_tests.helpers.run_queue import dequeued, repo_instance

ASSET_JOB = "__ASSET_JOB"
INSURANCE = {dg.AssetKey(name) for name in ("insurance", "insurance_quarantine", "insurance_tombstones",
                                            "insurance_changes", "insurance_history")}

pytestmark = pytest.mark.unit


@pytest.fixture
def instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for instance in repo_instance(tmp_path, monkeypatch):
        assert isinstance(instance.run_coordinator, TableTaggingRunCoordinator)
        yield instance


def _submitted(instance: dg.DagsterInstance, keys: set[dg.AssetKey], tags: dict[str, str] | None = None) -> dg.DagsterRun:
    """A run of the implicit asset job materializing `keys`, submitted as the UI submits it."""
    origin = RemoteJobOrigin(RemoteRepositoryOrigin(
        InProcessCodeLocationOrigin(LoadableTargetOrigin(module_name="lake_assets.definitions")), "__repository__"),
        ASSET_JOB)
    run = create_run_for_test(instance, job_name=ASSET_JOB, status=dg.DagsterRunStatus.NOT_STARTED,
                              tags=tags or {}, remote_job_origin=origin, asset_selection=frozenset(keys))
    instance.run_coordinator.submit_run(dg.SubmitRunContext(run, workspace=None))  # type: ignore[arg-type]
    stored = instance.get_run_by_id(run.run_id)
    assert stored is not None and stored.status == dg.DagsterRunStatus.QUEUED
    return stored



def test_a_run_of_a_declared_tables_assets_carries_its_table_and_waits_for_its_slot(
        instance: dg.DagsterInstance) -> None:
    writing = create_run_for_test(instance, job_name="apply_insurance", status=dg.DagsterRunStatus.STARTED,
                                  tags={TABLE_TAG: "insurance"})
    launched = _submitted(instance, INSURANCE)
    assert launched.tags[TABLE_TAG] == "insurance"
    assert dequeued(instance) == []  # one writer per table: it waits for the apply run
    instance.report_run_failed(writing)
    assert dequeued(instance) == [launched.run_id]


def test_a_report_refresh_carries_the_star(instance: dg.DagsterInstance) -> None:
    keys = {dg.AssetKey(["tpcds", "report_q12"]), dg.AssetKey(["tpcds", "report_q41"])}
    assert _submitted(instance, keys).tags[TABLE_TAG] == "tpcds"


def test_a_run_of_two_tables_or_of_no_table_gets_no_tag(instance: dg.DagsterInstance) -> None:
    assert TABLE_TAG not in _submitted(instance, {dg.AssetKey("insurance"), dg.AssetKey(["tpcds", "report_q12"])}).tags
    assert written_table([dg.AssetKey("lake_ledger")]) is None
    assert written_table([dg.AssetKey(["raw", "insurance_cdc"])]) is None


def test_a_tag_the_run_has_is_kept(instance: dg.DagsterInstance) -> None:
    assert _submitted(instance, {dg.AssetKey("insurance")}, tags={TABLE_TAG: "maintenance"}).tags[TABLE_TAG] == \
        "maintenance"
