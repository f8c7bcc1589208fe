"""The `lake` Typer application and the one place where failures become messages and exit codes."""

import functools
import signal
import sys

import typer

from lake_assets.cli.output import errors
from lake_assets.core.errors import LakeError
from lake_assets.core.private_home import owner_only_umask

app = typer.Typer(help="lake: a Dagster-orchestrated lakehouse on Delta Lake and Apache Iceberg.", no_args_is_help=True,
                  pretty_exceptions_enable=False)

#: `lake run` exit codes (README): 0 all applied and checks green; 1 the run or a check failed;
#: 3 the run succeeded but refused whole files (see `lake status`).
EXIT_OK, EXIT_FAILED, EXIT_FILES_REFUSED = 0, 1, 3
#: Exit code of a command stopped by Ctrl-C or SIGTERM (after its cleanup ran).
EXIT_INTERRUPTED = 130


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def friendly(command):
    """Turn expected failures into a clear message and a non-zero exit code.

    SIGTERM is handled like Ctrl-C: the command unwinds normally, so its leases, child
    processes and temporary files are released before it exits. Everything the command and
    the processes it starts write is owner-only (umask 077).
    """
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        owner_only_umask()
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            return command(*args, **kwargs)
        except FileNotFoundError as error:
            errors.print(f"[red]error:[/red] {error}")
            raise typer.Exit(2) from None
        except LakeError as error:
            errors.print(f"[red]error:[/red] {_first_line(error)}")
            raise typer.Exit(error.exit_code) from None
        except KeyboardInterrupt:
            errors.print("[yellow]interrupted[/yellow]")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as error:
            if not _from_the_engine(error):
                raise
            errors.print(f"[red]error:[/red] {_first_line(error)}")
            raise typer.Exit(EXIT_FAILED) from None
    return wrapper


def _from_the_engine(error: Exception) -> bool:
    """True for PySpark's errors (the engine refused a query, ...), without importing PySpark:
    an error of PySpark can only exist once PySpark is loaded."""
    errors_module = sys.modules.get("pyspark.errors")
    return errors_module is not None and isinstance(error, errors_module.PySparkException)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
