"""Creating the run of a first TPC-DS load costs the same whatever the number of days: the
lake's Dagster processes log one planned-materialization event per asset for a range run."""

import os

import dagster as dg
import pytest

from lake_assets.cli.session import DAGSTER_ENV, dagster_instance
from lake_assets.definitions import defs
from lake_assets.settings import LakeSettings
from lake_assets.tpcds.assets import DAILY, QUARANTINE_KEY, WEB_SALES_KEY
from lake_assets.jobs.tpcds import range_tags


@pytest.fixture
def lake_instance(tmp_path, monkeypatch: pytest.MonkeyPatch) -> dg.DagsterInstance:
    monkeypatch.setenv("LAKE_HOME", str(tmp_path / "lake"))
    for name in ("DAGSTER_HOME", *DAGSTER_ENV):
        monkeypatch.delenv(name, raising=False)
    instance = dagster_instance(LakeSettings.from_env())
    yield instance
    instance.dispose()
    for name in DAGSTER_ENV:  # set by the lake for its process; undo it for the next test
        os.environ.pop(name, None)


def test_a_run_over_every_day_plans_one_event_per_asset(lake_instance: dg.DagsterInstance) -> None:
    days = DAILY.get_partition_keys()
    job = defs.resolve_job_def("load_tpcds").get_subset(asset_selection={WEB_SALES_KEY, QUARANTINE_KEY})
    run = lake_instance.create_run_for_job(job_def=job, tags=range_tags(days[0], days[-1]))

    planned = lake_instance.get_records_for_run(
        run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED, limit=10_000).records
    assert len(planned) == 2  # was one per asset per day: 2 x 2,191
    web_sales = next(r for r in planned if r.asset_key == WEB_SALES_KEY)
    subset = web_sales.event_log_entry.dagster_event.event_specific_data.partitions_subset
    assert len(subset) == len(days)  # the whole range is still what the run plans
