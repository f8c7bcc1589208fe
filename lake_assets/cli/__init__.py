"""The `lake` command: one module per command group, registered on one Typer app."""

import warnings

# Dagster flags beta APIs (observable sources, backfill policies) when definitions are
# imported; that is for developers, not for the terminal of someone running `lake`.
warnings.filterwarnings("ignore", module=r"dagster(\.|$)")

from lake_assets.cli import approve, backfill, changes, dev, engine, query, raw, restore, run, snapshots, tpcds  # noqa: E402, F401 - importing registers the commands
from lake_assets.cli.app import app  # noqa: E402

__all__ = ["app"]
