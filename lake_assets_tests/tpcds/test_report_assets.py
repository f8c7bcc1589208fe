"""Report assets through Dagster: tables refreshed after corrections, and the DuckDB check passes or fails honestly."""

import datetime as dt

import dagster as dg

from lake_assets.core.formats import iceberg
from lake_assets.core.formats import iceberg_maintenance as maintenance
from lake_assets.core.tables import table
from lake_assets.jobs.maintenance import maintain_iceberg

from lake_assets.definitions import build_definitions
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.settings import LakeSettings
from lake_assets.tpcds.correction_batch import land_corrections
from lake_assets.tpcds.corrections import apply_corrections
from lake_assets.tpcds.report_assets import REPORT_ASSETS, REPORT_CHECKS, REPORTS_GROUP, report_key
from lake_assets.tpcds.reports import REPORTS, REPORTS_BY_NAME


def test_definitions_switch_the_check_by_setting():
    settings = LakeSettings.from_env()
    off = build_definitions(settings)
    on = build_definitions(LakeSettings(**{**settings.__dict__, "tpcds_report_checks": True}))
    keys = lambda d: {k for k in d.resolve_asset_graph().asset_check_keys if k.name == "report_equals_duckdb"}  # noqa: E731
    assert keys(off) == set() and len(keys(on)) == len(REPORTS)
    job = on.resolve_job_def("refresh_tpcds_reports")
    assert set(job.asset_layer.asset_graph.get_all_asset_keys()) >= {report_key(r) for r in REPORTS}
    asset = on.resolve_assets_def(report_key(REPORTS_BY_NAME["q12"]))
    assert "```sql" in asset.descriptions_by_key[report_key(REPORTS_BY_NAME["q12"])]
    assert asset.group_names_by_key[report_key(REPORTS_BY_NAME["q12"])] == REPORTS_GROUP


def test_reports_after_corrections_equal_duckdb(raw_star, star_engine):
    storage, _ = raw_star
    landed = land_corrections(storage, 150, seed=11)
    report = apply_corrections(storage, star_engine, "test-corrections")
    # other tests of the session may have landed batches in this raw zone too: count this one's
    [entry] = [f for f in report.files if f.source_file == landed.key]
    assert entry.rows_applied == 150
    resources = {"storage": StorageResource(bucket=storage.bucket, home=storage.home), "engine": SparkEngine()}
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([*REPORT_ASSETS, *REPORT_CHECKS], resources=resources, instance=instance,
                            raise_on_error=False)
    assert result.success, [str(e.step_failure_data.error.cause)[:600] for e in result.all_events if e.is_step_failure][:1]
    evaluations = result.get_asset_check_evaluations()
    assert len(evaluations) == len(REPORTS) and all(e.passed for e in evaluations), \
        [(e.asset_key, e.metadata) for e in evaluations if not e.passed]
    rows = {e.asset_key: e.metadata["dagster/row_count"].value for e in
            (m.materialization for m in result.get_asset_materialization_events())}
    assert rows[report_key(REPORTS_BY_NAME["sales_by_hour"])] > 0

    # a tampered report table fails its check (the check can fail)
    table = REPORTS_BY_NAME["sales_by_hour"].table
    star_engine.sql(f"DELETE FROM {table} WHERE t_hour = (SELECT min(t_hour) FROM {table})")
    checked = dg.materialize([*REPORT_ASSETS, *REPORT_CHECKS], resources=resources, instance=instance,
                             selection=dg.AssetSelection.checks_for_assets(report_key(REPORTS_BY_NAME["sales_by_hour"])),
                             raise_on_error=False)
    [evaluation] = checked.get_asset_check_evaluations()
    assert not evaluation.passed and evaluation.metadata["mismatches"].value == 1


def test_maintenance_shrinks_the_star_and_reports_still_equal_duckdb(raw_star, star_engine):
    """Run after the corrections: compaction + expiry + orphan removal, then every report check again."""
    storage, _ = raw_star
    resource = StorageResource(bucket=storage.bucket, home=storage.home)
    web_sales = table("tpcds.web_sales")
    before = maintenance.table_stats(storage, iceberg.open_table(storage, web_sales))
    totals = star_engine.sql("SELECT count(*), sum(ws_net_profit) FROM tpcds.web_sales").collect()[0]
    with dg.build_op_context(
            resources={"storage": resource, "engine": SparkEngine()},
            op_config={"snapshot_retention_hours": 0, "orphan_grace_hours": 0, "compact_min_files": 2}) as context:
        maintain_iceberg(context)
    after = maintenance.table_stats(storage, iceberg.open_table(storage, web_sales))
    assert after.snapshots == 1 < before.snapshots
    assert after.data_files <= before.data_files and after.objects < before.objects
    assert after.rows == before.rows
    assert star_engine.sql("SELECT count(*), sum(ws_net_profit) FROM tpcds.web_sales").collect()[0] == totals
    assert maintenance.orphan_files(storage, iceberg.open_table(storage, web_sales),
                                    dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)) == []
    resources = {"storage": resource, "engine": SparkEngine()}
    result = dg.materialize([*REPORT_ASSETS, *REPORT_CHECKS], resources=resources,
                            instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)
    assert result.success and all(e.passed for e in result.get_asset_check_evaluations())
