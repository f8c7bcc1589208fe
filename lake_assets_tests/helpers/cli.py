"""Run `lake` commands in the test's process (Typer's CliRunner)."""

from typer.testing import CliRunner

from lake_assets.cli import app

runner = CliRunner()


def lake(*args: str) -> tuple[int, str]:
    """Exit code and output of `lake ARGS...`."""
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output
