"""`lake status`: what became of every raw object, opening with a summary per table and domain.

Asks the running `lake dev` first (cli/dev_status.py: answered in its warm process), else
computes the answer itself (core/raw_status.py); both give the same rows.
"""

from typing import Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import Format, console, render

FILE_COLUMNS = ["file", "bytes", "status", "version", "rows", "applied", "superseded", "quarantined", "detail"]
SUMMARY_COLUMNS = ["domain", "table", "files", "pending", "applied", "superseded", "refused", "held", "other",
                   "rows_applied", "rows_superseded", "rows_quarantined", "last"]


@app.command()
@friendly
def status(
    fmt: Annotated[Format, typer.Option("--format")] = Format.table,
    pending: Annotated[bool, typer.Option("--pending", help="only the objects no run has taken in yet")] = False,
    tables: Annotated[list[str] | None, typer.Option(
        "--table", help="only this table's objects (a domain's name: its tables'); repeat for more")] = None,
    since: Annotated[str | None, typer.Option(
        "--since", help="only objects recorded (or landed, if pending) since: an ISO date/time or a span back "
                        "from now (30m, 2h, 1d)")] = None,
    summary: Annotated[bool, typer.Option("--summary", help="only the summary per table and domain")] = False,
) -> None:
    """What is pending, applied, rejected and held in the raw zone, per file, and why.

    Opens with a summary per table and domain (files by status; rows applied, superseded and
    quarantined), then one line per file. `--format json|csv` prints the files (or, with
    `--summary`, the summary) only. With `lake dev` running, it answers from there.
    """
    from lake_assets.core.errors import UsageError
    from lake_assets.core.raw_status import select, summarize

    after = None
    if since is not None:
        from lake_assets.core.raw_status import since as parse_since

        try:
            after = parse_since(since)
        except ValueError:
            raise UsageError(f"--since takes an ISO date or time (2024-04-01, 2024-04-01T09:00) or a span back "
                             f"from now (30m, 2h, 1d), not {since!r}") from None
    chosen = select(_statuses(), pending=pending, tables=tuple(tables or ()), after=after)
    lines = summarize(chosen)
    readable = fmt in (Format.table, Format.vertical)  # for a person: the summary opens it
    if summary or readable:
        render(SUMMARY_COLUMNS, [tuple(line.as_dict()[c] for c in SUMMARY_COLUMNS) for line in lines],
               fmt, title="summary per table and domain", sections=[line.table == "all" for line in lines])
    if not summary:
        if readable:
            console.print()
        rows = [tuple(s.as_dict()[c] for c in ("table", *FILE_COLUMNS)) for s in chosen]
        render(["table", *FILE_COLUMNS], rows, fmt, title=_title(len(chosen)))


def _title(count: int) -> str:
    return f"{count} raw object{'' if count == 1 else 's'}"


def _statuses() -> list:  # list[FileStatus]
    """Every raw object's status: from `lake dev` when one runs on this lake, else computed here."""
    from lake_assets.cli.dev_status import ask, lake_identity
    from lake_assets.core.raw_status import FileStatus
    from lake_assets.settings import StorageSettings

    storage = StorageSettings.from_env()
    if storage.embedded:
        served = ask(_home(storage.home), lake_identity(storage.bucket))
        if served is not None:
            return [FileStatus.from_dict(values) for values in served]
    from lake_assets.cli.session import importing, lake_session

    with lake_session(while_starting=importing("lake_assets.core.ledger", "lake_assets.core.raw_status")) as lake:
        from lake_assets.core.ledger import Ledger
        from lake_assets.core.raw_status import file_statuses

        return file_statuses(lake.storage, Ledger(lake.storage).latest_by_table())


def _home(home: str):  # -> Path
    from pathlib import Path

    return Path(home)
