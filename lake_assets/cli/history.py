"""`lake history`'s output (the computation is core/history.py); `lake query` registers the command."""

from lake_assets.cli.output import Format, render
from lake_assets.cli.session import LakeSession


def show_history(lake: LakeSession, name: str, fmt: Format) -> None:
    """The table's history, newest first: Delta versions or Iceberg snapshots (first column the id)."""
    from lake_assets.core.history import history

    columns, rows = history(lake.storage, name)
    render(columns, rows, fmt)
