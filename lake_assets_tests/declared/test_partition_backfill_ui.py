"""A backfill of a declared table's partitions, launched as the UI's "Launch backfill" button
launches it (the webserver's `launchPartitionBackfill` mutation), carried out by `lake dev`'s own
daemon: ONE run for the range, which loads each partition's newest snapshot again. The daemon's
backfill machinery refused a multi-asset whose assets do not share the table's partitions; this
is the path that shows it."""

import json
import urllib.request
from pathlib import Path

import dagster as dg
import pytest

from lake_assets_tests.declared.test_partitions import DECLARATION, KEY
from lake_assets_tests.helpers.lake_dev import LakeDev, lake_dev, wait_for

pytestmark = pytest.mark.e2e

LAUNCH = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""
DAYS = {"2024-04-01": "1,2024-04-01,10\n2,2024-04-01,20\n", "2024-04-02": "3,2024-04-02,30\n"}


def _graphql(dev: LakeDev, query: str, variables: dict) -> dict:
    request = urllib.request.Request(f"{dev.url}/graphql", data=json.dumps({"query": query, "variables": variables})
                                     .encode(), headers={"Content-Type": "application/json",
                                                         "Authorization": f"Bearer {dev.token}"})
    return json.loads(urllib.request.urlopen(request, timeout=60).read())["data"]


def _applied(dev: LakeDev) -> bool:
    result = dev.lake("status", "--format", "json")
    rows = [r for r in json.loads(result.stdout) if r["file"].startswith("raw/visits/")] if result.returncode == 0 else []
    return len(rows) == len(DAYS) and all(r["status"] == "applied" for r in rows)


def test_a_backfill_launched_in_the_ui_loads_the_partitions_again_in_one_run(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "visits.yaml").write_text(DECLARATION)
    with lake_dev(tmp_path, LAKE_TABLES_DIR=str(tables)) as dev:
        for day, rows in DAYS.items():
            (tmp_path / f"{day}.csv").write_text(rows)
            put = dev.lake("put", str(tmp_path / f"{day}.csv"), "--to", "visits:snapshot", "--as",
                           f"day={day}/part-0.csv")
            assert put.returncode == 0, put.stdout + put.stderr
        wait_for(lambda: _applied(dev), 180, "the sensor's run of the two days")
        wait_for(dev.idle, 120, "the lake at rest")

        launched = _graphql(dev, LAUNCH, {"params": {"assetSelection": [{"path": ["visits"]}],
                                                     "partitionNames": sorted(DAYS), "fromFailure": False}})
        backfill_id = launched["launchPartitionBackfill"].get("backfillId")
        assert backfill_id, launched

        monkeypatch.setenv("DAGSTER_HOME", str(dev.home / "dagster"))
        with dg.DagsterInstance.get() as instance:
            def done() -> bool:
                return instance.get_backfill(backfill_id).status.value != "REQUESTED"  # its enum is not public
            wait_for(done, 240, "the daemon's backfill")
            backfill = instance.get_backfill(backfill_id)
            assert backfill.status.value == "COMPLETED_SUCCESS", backfill.error
            runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
            assert len(runs) == 1 and runs[0].status == dg.DagsterRunStatus.SUCCESS, runs
            assert (runs[0].tags["dagster/asset_partition_range_start"],
                    runs[0].tags["dagster/asset_partition_range_end"]) == ("2024-04-01", "2024-04-02")
            assert runs[0].tags.get("lake/table") == "visits"  # one writer of the table at a time
            records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=KEY),
                                                      limit=100).records
            loaded = {r.partition_key: r.asset_materialization.metadata["partition_source_objects"].value
                      for r in records if r.run_id == runs[0].run_id}
        assert loaded == {day: [f"raw/visits/days/day={day}/part-0.csv"] for day in DAYS}, loaded
        rows = dev.lake("query", "SELECT id, pages FROM visits ORDER BY id", "--format", "json")
        assert json.loads(rows.stdout) == [{"id": 1, "pages": 10}, {"id": 2, "pages": 20}, {"id": 3, "pages": 30}]
