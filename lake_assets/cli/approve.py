"""`lake approve`: publish snapshots held by the write-audit-publish guard (core/snapshot_guard.py)."""

from typing import Annotated

import typer

from lake_assets.cli.app import EXIT_OK, app, friendly
from lake_assets.cli.output import console
from lake_assets.cli.session import lake_session
from lake_assets.core.errors import UsageError


@app.command()
@friendly
def approve(
    files: Annotated[list[str] | None, typer.Argument(help="held raw files (key or s3:// URI), see `lake status`")] = None,
    all_held: Annotated[bool, typer.Option("--all", help="approve every held snapshot")] = False,
) -> None:
    """Release held snapshots and publish them now (a part releases its whole snapshot).

    A full load that is empty, has quarantined rows, or would shrink the table too much is
    held instead of published, and so is a TPC-DS day object that would empty its day or
    shrink it too much; approving publishes it with the sequence it was held with, through
    the same run as `lake run` (which applies everything else pending too).
    """
    if bool(files) == all_held:
        raise UsageError("name the held FILE(s) to approve, or pass --all")
    from lake_assets.cli.fates import pending_snapshot
    from lake_assets.cli.job_runner import apply_everything
    from lake_assets.core.ledger import Ledger
    from lake_assets.core.snapshot_guard import approve as release
    from lake_assets.core.apply.holds import held_snapshots
    from lake_assets.core.registry import declarations
    from lake_assets.tpcds.pending import held_objects

    with lake_session() as lake:
        storage = lake.storage
        wanted = None if all_held else [f.removeprefix(f"s3://{storage.bucket}/") for f in files or []]
        released = release(Ledger(storage), [*(h for d in declarations() for h in held_snapshots(d, storage)),
                                                   *held_objects(storage)], wanted, "lake approve")
        for held in released:
            console.print(f"approved {storage.uri(held.key)} (etag {held.entry['source_etag']})")
        code = apply_everything(lake, pending_snapshot(storage))
        if code != EXIT_OK:
            raise typer.Exit(code)
