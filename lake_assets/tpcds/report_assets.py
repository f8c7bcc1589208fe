"""The business zone as Dagster assets: one Iceberg report table per SQL file, and their checks.

Each report asset recomputes its table from the star with the engine (Sail by default) and
replaces its contents in one snapshot (tpcds/report_tables.py); its description holds the
SQL. The reports refresh after the star changes (`REFRESH_AFTER_STAR`, evaluated by
`reports_automation_sensor` in `lake dev`'s daemon) or on demand through the
`refresh_tpcds_reports` job (`lake run` runs it after every load).

The check `report_equals_duckdb` runs every report's SQL on DuckDB over the raw files
(corrections applied) and compares with the table: an independent engine on independent
input. It reads the whole raw zone, so it is switched on by LAKE_TPCDS_REPORT_CHECKS=1.
"""

import re

import dagster as dg

from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.tpcds.assets import CORRECTIONS_KEY, OWNERS, WEB_SALES_KEY, asset_key
from lake_assets.tpcds.report_tables import refresh_report
from lake_assets.tpcds.reports import REPORT_PREFIX, REPORTS, Report

REPORTS_GROUP = "tpcds_reports"

#: Refresh once after any star table (or the corrections) changed, when no load of them is in
#: progress. Dagster's `eager()` also waits until no dependency is *missing*, and web_sales
#: has a daily partition for every day 1998-2003 while the generator fills only some, so
#: reports over web_sales never refreshed: here only the dimensions must exist. A change is
#: handled by a refresh requested or finished after it, as with `since_last_handled()`, except
#: that a tick which sees both a refresh finish and a star change keeps the change: Dagster's
#: `since` lets the reset win, and a `lake backfill` right after a refresh was lost
#: (dagster-io/dagster#33586).
_HANDLED = (dg.AutomationCondition.newly_requested()
            | (dg.AutomationCondition.newly_updated() & ~dg.AutomationCondition.any_deps_updated())
            | dg.AutomationCondition.initial_evaluation())
REFRESH_AFTER_STAR = (
    dg.AutomationCondition.any_deps_updated().since(_HANDLED)
    & ~dg.AutomationCondition.any_deps_missing().ignore(dg.AssetSelection.assets(WEB_SALES_KEY, CORRECTIONS_KEY))
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("after the star changes")


def report_key(report: Report) -> dg.AssetKey:
    return asset_key(f"{REPORT_PREFIX}{report.name}")


def star_deps(report: Report) -> list[dg.AssetKey]:
    """The star tables the report's SQL reads (plus the corrections that change web_sales)."""
    tables = sorted(set(re.findall(r"\blake\.tpcds\.(\w+)", report.sql)))
    deps = [asset_key(name) for name in tables]
    return deps + [CORRECTIONS_KEY] if "web_sales" in tables else deps


def _report_asset(report: Report) -> dg.AssetsDefinition:
    @dg.asset(
        key=report_key(report), group_name=REPORTS_GROUP, owners=OWNERS, deps=star_deps(report),
        kinds={"iceberg", "spark"}, automation_condition=REFRESH_AFTER_STAR,
        description=f"{report.description}\n\nIceberg table `{report.table}`, recomputed from the star and "
                    f"replaced in one snapshot:\n\n```sql\n{report.sql}\n```",
        metadata={"dagster/table_name": report.table, "sql": dg.MetadataValue.md(f"```sql\n{report.sql}\n```")},
    )
    def refresh(context: dg.AssetExecutionContext, storage: StorageResource, engine: SparkEngine) -> dg.MaterializeResult:
        with storage.running() as running:
            result = refresh_report(engine.session(running), report)
        context.log.info(f"{report.table}: {result.rows} rows in {result.seconds} s")
        return dg.MaterializeResult(metadata={
            "dagster/row_count": result.rows, "columns": ", ".join(result.columns),
            "created": result.created, "duration_seconds": result.seconds, "table": result.table,
        })

    return refresh


REPORT_ASSETS = [_report_asset(report) for report in REPORTS]

@dg.multi_asset_check(
    specs=[dg.AssetCheckSpec("report_equals_duckdb", asset=report_key(report),
                             description="The report table equals DuckDB running the same SQL on the raw files "
                                         "(corrections applied).")
           for report in REPORTS],
    can_subset=True,
)
def reports_equal_duckdb(context: dg.AssetCheckExecutionContext, storage: StorageResource, engine: SparkEngine):
    from lake_assets.tpcds.report_checks import compare_report
    from lake_assets.tpcds.raw_duckdb import raw_connection

    with storage.running() as running:
        spark = engine.session(running)
        con = raw_connection(running, corrections=True)
        try:
            for report in REPORTS:
                if report_key(report) not in {key.asset_key for key in context.selected_asset_check_keys}:
                    continue
                mismatches, rows = compare_report(spark, con, report)
                yield dg.AssetCheckResult(
                    asset_key=report_key(report), check_name="report_equals_duckdb", passed=not mismatches,
                    metadata={"rows": rows, "mismatches": len(mismatches),
                              "examples": dg.MetadataValue.json(mismatches[:5])},
                )
        finally:
            con.close()


REPORT_CHECKS = [reports_equal_duckdb]
