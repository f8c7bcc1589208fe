"""The `lake` Typer application and the one place where failures become messages and exit codes."""

import functools

import typer
from pyspark.errors import PySparkException

from lake_assets.cli.output import errors
from lake_assets.core.errors import LakeError

app = typer.Typer(help="lake: a Dagster-orchestrated lakehouse on Delta Lake.", no_args_is_help=True,
                  pretty_exceptions_enable=False)


def friendly(command):
    """Turn expected failures into a clear message and a non-zero exit code."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except FileNotFoundError as error:
            errors.print(f"[red]error:[/red] {error}")
            raise typer.Exit(2) from None
        except LakeError as error:
            errors.print(f"[red]error:[/red] {_first_line(error)}")
            raise typer.Exit(error.exit_code) from None
        except PySparkException as error:
            errors.print(f"[red]error:[/red] {_first_line(error)}")
            raise typer.Exit(1) from None
    return wrapper


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
