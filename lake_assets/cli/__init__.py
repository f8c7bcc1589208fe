"""The `lake` command: one module per command group, registered on one Typer app."""

from lake_assets.cli import backfill, dev, query, raw, run  # noqa: F401 - importing registers the commands
from lake_assets.cli import snapshots, tpcds  # noqa: F401
from lake_assets.cli.app import app

__all__ = ["app"]
