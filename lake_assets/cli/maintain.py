"""`lake maintain`: the nightly maintenance now (what the `maintenance_job` schedule runs at 03:00)."""

import typer

from lake_assets.cli.app import EXIT_FAILED, app, friendly
from lake_assets.cli.output import console
from lake_assets.cli.session import lake_session


@app.command()
@friendly
def maintain() -> None:
    """Compact and vacuum every Delta table; compact, expire snapshots and remove orphan files of every
    Iceberg table: the nightly maintenance job, now, in this process.

    Vacuum keeps every file a version inside the time-travel window needs (LAKE_TIME_TRAVEL_HOURS).
    Each table is maintained under its write lock, so a run writing it (under `lake dev` too) is
    waited for. Exit code 0: done; 1: a table could not be maintained (the reason is printed).
    """
    from lake_assets.cli.job_runner import execute, failure_messages

    with lake_session() as lake:
        result = execute(lake, "maintenance_job", "lake maintain")
    for event in result.all_node_events:
        if not event.is_successful_output or event.step_output_data is None:
            continue
        for name, value in event.step_output_data.metadata.items():
            if isinstance(value.value, dict) and "before" in value.value:
                console.print(f"{name}: {_summary(value.value)}")
    if not result.success:
        for message in failure_messages(result):
            console.print(f"[red]failed:[/red] {message}", highlight=False)
        raise typer.Exit(EXIT_FAILED)


def _summary(done: dict) -> str:
    """One line of what maintenance did to a table (from its op's metadata)."""
    before, after = done["before"], done["after"]
    if "files_compacted" in done:  # Delta
        return (f"compacted {done['files_compacted']} file(s), vacuumed {done['files_vacuumed']}; "
                f"files {before['files']} -> {after['files']}, stored {before['stored_files']} -> "
                f"{after['stored_files']}; versions readable from {after['oldest_readable_version']}")
    return (f"compacted {done['partitions_compacted']} partition(s), expired {done['snapshots_expired']} "
            f"snapshot(s), removed {done['orphans_removed']} orphan file(s)")
