"""The `lake` command."""

from lake_assets.cli.commands import app

__all__ = ["app"]
