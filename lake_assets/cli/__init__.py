"""The `lake` command: one module per command group, registered on one Typer app."""

from lake_assets.cli import approve, backfill, dev, query, raw, run, snapshots, tpcds  # noqa: F401 - importing registers the commands
from lake_assets.cli.app import app

__all__ = ["app"]
