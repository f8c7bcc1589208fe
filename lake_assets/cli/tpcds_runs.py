"""Runs of the `load_tpcds` job from the CLI: `lake backfill` and the TPC-DS half of `lake run`
(one run for everything pending under raw/tpcds/, the same request the sensor and the schedule make)."""

import datetime as dt
from dataclasses import dataclass, field

import dagster as dg

from lake_assets.cli.job_runner import execute, report_checks
from lake_assets.cli.output import console
from lake_assets.cli.session import LakeSession
from lake_assets.core.errors import UsageError
from lake_assets.tpcds.assets import DAILY, OBJECT_COUNTS, QUARANTINE_KEY, WEB_SALES_KEY
from lake_assets.jobs.tpcds import TPCDS_TAGS, load_config, range_tags, selection_for
from lake_assets.tpcds.pending import pending_work

#: Partitioned tables, by name, and their asset keys.
PARTITIONED = {"tpcds.web_sales": WEB_SALES_KEY}


def run_tpcds(lake: LakeSession, keys: list[dg.AssetKey], tags: dict[str, str],
              launched_by: str, reapply: bool = False, pending_only: bool = False) -> dg.ExecuteInProcessResult:
    """Materialize `keys` (and their checks) in one run of the `load_tpcds` job (with `reapply`,
    its loading assets take in the objects `lake restore` reverted too; with `pending_only`,
    web_sales loads only the new days of its range: jobs/tpcds.py `load_config`)."""
    config = load_config(keys, reapply, pending_only) or None
    return execute(lake, "load_tpcds", launched_by, {**TPCDS_TAGS, **tags}, config=config, asset_selection=keys)


def report_tpcds_run(result: dg.ExecuteInProcessResult) -> bool:
    """Print what the run loaded per table; True if it and all its checks succeeded."""
    seen = set()
    for event in result.get_asset_materialization_events():
        materialization = event.materialization
        meta = {k: v.value for k, v in materialization.metadata.items()}
        if "table" not in meta or materialization.asset_key in seen:
            continue
        seen.add(materialization.asset_key)
        # web_sales: each day's partition carries its own counts, and the run's as run_<key>
        meta |= {key: meta[f"run_{key}"] for key in OBJECT_COUNTS if f"run_{key}" in meta}
        console.print(
            f"{materialization.asset_key.to_user_string()}: {meta['objects']} object(s), "
            f"rows {meta['rows_before']} -> {meta['rows_after']} ({meta['rows_applied']} applied, "
            f"{meta['rows_superseded']} superseded, {meta['rows_quarantined']} quarantined), "
            f"snapshot {meta['iceberg_snapshot']}, {meta['duration_seconds']} s"
        )
    return report_checks(result)


@dataclass
class TpcdsRuns:
    """What the TPC-DS half of `lake run` did: whether everything succeeded, and its runs."""

    ok: bool = True
    run_ids: list[str] = field(default_factory=list)


def run_tpcds_pending(lake: LakeSession, reapply: bool = False) -> TpcdsRuns:
    """One run for everything pending in the TPC-DS raw zone (with `reapply`, also the objects
    `lake restore` reverted), then the reports' refresh."""
    work = pending_work(lake.storage, reapply)
    keys, tags = selection_for(work, lake.storage)
    if not keys:
        console.print("tpcds: nothing pending")
        return TpcdsRuns()
    load = run_tpcds(lake, keys, tags, "lake run --reapply" if reapply else "lake run", reapply, pending_only=True)
    loaded = report_tpcds_run(load)
    # the daemon refreshes the reports when the star changes (eager automation); so does `lake run`
    refresh = execute(lake, "refresh_tpcds_reports", "lake run")
    return TpcdsRuns(report_checks(refresh) and loaded, [load.run_id, refresh.run_id])


def backfill_selection(name: str, start: str, end: str) -> tuple[list[dg.AssetKey], dict[str, str]]:
    """The assets and tags of one run re-loading the days `start`..`end` (inclusive) of the
    partitioned table `name`; raises UsageError for anything else."""
    if name not in PARTITIONED:
        raise UsageError(f"{name!r} is not a partitioned table; partitioned: {', '.join(PARTITIONED)}")
    first, last = _day(start, "--from"), _day(end, "--to")
    if first > last:
        raise UsageError(f"--from {first} is after --to {last}")
    return [PARTITIONED[name], QUARANTINE_KEY], range_tags(first.isoformat(), last.isoformat())


def _day(text: str, option: str) -> dt.date:
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{option} must be a date YYYY-MM-DD, not {text!r}") from None
    first = dt.date.fromisoformat(DAILY.get_first_partition_key())
    last = dt.date.fromisoformat(DAILY.get_last_partition_key())
    if not first <= day <= last:
        raise UsageError(f"{option} {day} is outside the partitions {first}..{last}")
    return day
