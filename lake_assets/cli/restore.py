"""`lake restore`: bring a table back to an earlier version (Delta) or snapshot (Iceberg)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from lake_assets.cli.app import EXIT_FAILED, app, friendly
from lake_assets.cli.output import console, errors
from lake_assets.cli.session import lake_session

if TYPE_CHECKING:
    from lake_assets.core.tables import LakeTable
    from lake_assets.resources.storage import LakeStorage


def restore_now(name: str, version: int | None, as_of: str | None, launched_by: str) -> None:
    """Check the target, then run the `restore_table_job` (one Dagster run) and print what it
    did; then rebuild the reports from a restored star table (as `lake run` does after a load)."""
    from lake_assets.cli.job_runner import execute, failure_messages, report_checks
    from lake_assets.runs import TABLE_TAG
    from lake_assets.jobs.restore import restorable, target_version

    entry = restorable(name)
    with lake_session() as lake:
        target = target_version(lake.storage, entry, version, as_of)
        result = execute(lake, "restore_table_job", launched_by,
                         tags={TABLE_TAG: entry.write_lock},
                         config={"ops": {"restore_table": {"config": {"table": entry.name, "version": target}}}})
        if not result.success:
            for message in failure_messages(result):
                errors.print(f"[red]restore failed:[/red] {message}")
            raise typer.Exit(EXIT_FAILED)
        for event in result.get_asset_materialization_events():
            _print_restore(entry, {k: v.value for k, v in event.materialization.metadata.items()})
        if _rebuilds_reports(lake.storage, entry):
            if not report_checks(execute(lake, "refresh_tpcds_reports", launched_by)):
                raise typer.Exit(EXIT_FAILED)
            console.print(f"  reports rebuilt from the restored {entry.name}")


def _print_restore(entry: LakeTable, meta: dict) -> None:
    """What the restore did, from its materialization's metadata."""
    console.print(f"{entry.name}: {meta['description']}")
    for file in meta.get("reverted_files") or []:
        console.print(f"  reverted {file} (apply it again with `lake run --reapply`)")
    for file in meta.get("reinstated_files") or []:
        console.print(f"  back in the table: {file}")
    for file in meta.get("restated_files") or []:
        console.print(f"  as applied in the restored version: {file}")
    if meta.get("tombstones_before") != meta.get("tombstones_after"):
        console.print(f"  tombstones {meta['tombstones_before']} -> {meta['tombstones_after']} "
                      "(back to before the reverted runs)")


def _rebuilds_reports(storage: LakeStorage, entry: LakeTable) -> bool:
    """Whether the restore of `entry` leaves report tables to rebuild: a star table restored
    while reports exist (`lake dev`'s daemon rebuilds them too, after any star change)."""
    from lake_assets.core.formats import iceberg
    from lake_assets.core.tables import TPCDS_REPORTS

    derived = [t for t in TPCDS_REPORTS if entry.name in t.derived_from]
    return any(iceberg.open_table(storage, t) is not None for t in derived)


@app.command()
@friendly
def restore(
    name: Annotated[str, typer.Argument(metavar="TABLE", help="table name, e.g. insurance or tpcds.web_sales")],
    version: Annotated[int | None, typer.Option("--version", help="Delta version or Iceberg snapshot id "
                                                                  "(see `lake history`)")] = None,
    as_of: Annotated[str | None, typer.Option("--as-of", help="ISO timestamp (UTC unless it has a zone): the "
                                                               "version current then")] = None,
) -> None:
    """Bring TABLE back to an earlier version as a NEW version: history keeps the mistake.

    Runs as a Dagster job under the table's write lock (a materialization in the UI). Raw
    objects applied after that version (insurance files; TPC-DS days, corrections, dimension
    snapshots) become `reverted` in `lake status` and a plain `lake run` leaves them alone;
    `lake run --reapply` applies them again. A table derived from another (a history, change
    feed, quarantine, tombstones, report) follows that table, never alone (the quarantine keeps
    every refused line); restoring a TPC-DS star table rebuilds the reports.
    """
    restore_now(name, version, as_of, "lake restore")
