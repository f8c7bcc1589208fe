"""When the daemon refreshes the report tables: Dagster evaluates the lake's real definitions
against a real (ephemeral) instance holding the materializations a star load writes."""

import dagster as dg

from lake_assets.definitions import defs
from lake_assets.runs import TABLE_TAG
from lake_assets.tpcds.assets import DAILY, DIMENSION_KEYS, WEB_SALES_KEY
from lake_assets.tpcds.report_assets import REPORT_ASSETS, REPORTS_GROUP, report_key
from lake_assets.tpcds.reports import REPORTS

REPORT_KEYS = {report_key(report) for report in REPORTS}
SELECTION = dg.AssetSelection.groups(REPORTS_GROUP)


def _load_star(instance: dg.DagsterInstance, days: int = 150) -> None:
    """What a star load records: every dimension, and some of web_sales' daily partitions."""
    for key in DIMENSION_KEYS:
        instance.report_runless_asset_event(dg.AssetMaterialization(key))
    for day in DAILY.get_partition_keys()[400:400 + days]:
        instance.report_runless_asset_event(dg.AssetMaterialization(WEB_SALES_KEY, partition=day))


def _requested(result) -> set[dg.AssetKey]:
    return {r.key for r in result.results if r.true_subset.size}


def test_every_report_refreshes_once_after_the_star_loads_and_again_after_it_changes() -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        empty = dg.evaluate_automation_conditions(defs, instance, SELECTION)
        assert _requested(empty) == set()  # nothing loaded: nothing to report on

        _load_star(instance)
        loaded = dg.evaluate_automation_conditions(defs, instance, SELECTION, cursor=empty.cursor)
        assert _requested(loaded) == REPORT_KEYS  # web_sales has most days missing: eager() refreshed only q41

        quiet = dg.evaluate_automation_conditions(defs, instance, SELECTION, cursor=loaded.cursor)
        assert _requested(quiet) == set()  # handled: no second refresh for the same load

        instance.report_runless_asset_event(dg.AssetMaterialization(WEB_SALES_KEY, partition="1999-02-01"))
        changed = dg.evaluate_automation_conditions(defs, instance, SELECTION, cursor=quiet.cursor)
        assert _requested(changed) == {key for key in REPORT_KEYS
                                       if WEB_SALES_KEY in defs.resolve_assets_def(key).dependency_keys}
        assert _requested(changed) and _requested(changed) != REPORT_KEYS  # q41 reads only item


def test_no_refresh_before_the_dimensions_exist() -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        first = dg.evaluate_automation_conditions(defs, instance, SELECTION)
        instance.report_runless_asset_event(dg.AssetMaterialization(WEB_SALES_KEY, partition="1999-02-01"))
        assert _requested(dg.evaluate_automation_conditions(defs, instance, SELECTION, cursor=first.cursor)) == set()


def test_the_automation_sensor_runs_by_default_and_tags_runs_with_the_tpcds_table() -> None:
    sensor = defs.resolve_sensor_def("tpcds_reports_after_star")
    assert isinstance(sensor, dg.AutomationConditionSensorDefinition)
    assert sensor.default_status is dg.DefaultSensorStatus.RUNNING
    assert sensor.run_tags == {TABLE_TAG: "tpcds"}  # dagster.yaml: one run at a time per table tag
    assert set(sensor.asset_selection.resolve(defs.resolve_asset_graph())) == REPORT_KEYS
    assert defs.resolve_job_def("refresh_tpcds_reports").tags[TABLE_TAG] == "tpcds"
    assert len(REPORT_ASSETS) == len(REPORT_KEYS)


def test_a_star_change_between_two_ticks_that_also_saw_the_refresh_finish_refreshes_again() -> None:
    """The refresh a tick requested finishes, and a backfill changes web_sales, before the next
    tick: that tick sees both. The change must not be taken as handled by the refresh that
    started before it (Dagster's `since_last_handled()` resets on the asset's own update and loses
    it: dagster-io/dagster#33586; one CI run in three hit it after `lake backfill`)."""
    with dg.DagsterInstance.ephemeral() as instance:
        empty = dg.evaluate_automation_conditions(defs, instance, SELECTION)
        _load_star(instance)
        loaded = dg.evaluate_automation_conditions(defs, instance, SELECTION, cursor=empty.cursor)
        assert _requested(loaded) == REPORT_KEYS
        quiet = dg.evaluate_automation_conditions(defs, instance, SELECTION, cursor=loaded.cursor)
        assert _requested(quiet) == set()

        for key in REPORT_KEYS:  # the requested refresh finishes ...
            instance.report_runless_asset_event(dg.AssetMaterialization(key))
        instance.report_runless_asset_event(dg.AssetMaterialization(WEB_SALES_KEY, partition="1999-02-01"))  # ... then the backfill
        both = dg.evaluate_automation_conditions(defs, instance, SELECTION, cursor=quiet.cursor)
        assert _requested(both) == {key for key in REPORT_KEYS
                                    if WEB_SALES_KEY in defs.resolve_assets_def(key).dependency_keys}
