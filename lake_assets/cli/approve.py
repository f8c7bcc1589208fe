"""`lake approve`: publish full loads held by the write-audit-publish guard."""

from typing import Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import console
from lake_assets.cli.session import lake_session
from lake_assets.core.errors import UsageError


@app.command()
@friendly
def approve(
    files: Annotated[list[str] | None, typer.Argument(help="held raw files (key or s3:// URI), see `lake status`")] = None,
    all_held: Annotated[bool, typer.Option("--all", help="approve every held full load")] = False,
) -> None:
    """Release held full loads and publish them now (a part releases its whole snapshot).

    A full load that is empty, has quarantined rows, or would shrink the table too much is
    held instead of published; approving it publishes it as one new table version, through
    the same run as any other full load.
    """
    if bool(files) == all_held:
        raise UsageError("name the held FILE(s) to approve, or pass --all")
    from lake_assets.cli.job_runner import report_run, run_pending
    from lake_assets.core.apply.holds import approve_held, held_objects
    from lake_assets.declarations import DECLARATIONS

    with lake_session() as lake:
        bucket = f"s3://{lake.storage.bucket}/"
        wanted = None if all_held else [f.removeprefix(bucket) for f in files or []]
        strays = [k for k in wanted or [] if not any(d.source(k) for d in DECLARATIONS)]
        if strays:
            raise UsageError(f"not held: {', '.join(strays)} (see `lake status`)")
        released = []
        for declared in DECLARATIONS:
            mine = None if wanted is None else [k for k in wanted if declared.source(k)]
            if mine or (mine is None and held_objects(declared, lake.storage)):
                released += approve_held(declared, lake.storage, mine, "lake approve")
        if not released:
            raise UsageError("no full load is held")
        for obj in released:
            console.print(f"approved {lake.storage.uri(obj.key)} (etag {obj.etag})")
        code = report_run(run_pending(lake))
        if code:
            raise typer.Exit(code)
