"""`lake dev`: the Dagster webserver and daemon with the embedded S3, until Ctrl-C or SIGTERM.

The webserver answers only requests that carry a token made at each start (Dagster has no
authentication of its own; cli/dev_services.py and cli/web_token.py): the terminal shows the
address with the token, which sets a cookie in the browser, and LAKE_HOME/dagster-ui-token
holds it for scripts (`Authorization: Bearer`). An embedded S3 server that dies meanwhile is
reported at once and started again (cli/dev_s3.py).

The terminal stays quiet: Dagster's services log at WARNING (errors still show), runs' own
log lines are left out (cli/dev_output.py), and `lake dev` prints one line per finished run
(cli/dev_runs.py); `--verbose` shows everything, Dagster's INFO logs (every sensor tick) and
each run's log lines included.
"""

import contextlib
import ctypes
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import console, errors

if TYPE_CHECKING:
    from lake_assets.cli.dev_runs import RunReporter
    from lake_assets.cli.dev_s3 import S3Watch

_PR_SET_PDEATHSIG = 1
#: Without --verbose: no Python warnings (Dagster's beta/supersession notices at every import).
QUIET_ENV = {"PYTHONWARNINGS": "ignore"}
#: How often the terminal looks for finished runs and at the S3 server.
POLL_SECONDS = 2.0
#: The webserver's token, for scripts (`Authorization: Bearer ...`), while `lake dev` runs.
TOKEN_FILE = "dagster-ui-token"


@app.command()
@friendly
def dev(
    port: Annotated[int | None, typer.Option(help="webserver port (default LAKE_WEB_PORT or 3000; 0: a free one)")]
    = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="also show Dagster's INFO logs (every sensor tick) and each run's log lines")]
    = False,
) -> None:
    """Dagster webserver and daemon on 127.0.0.1 with the sensors running, plus the embedded S3.

    Holds a lease on the embedded S3 server for its whole life, so no command stops it
    meanwhile; Ctrl-C, SIGTERM or even SIGKILL of `lake dev` stops the Dagster processes.
    Prints one line per finished run; `--verbose` adds Dagster's own INFO logs and each run's log lines.
    """
    from lake_assets.cli.dev_output import forward
    from lake_assets.cli.dev_runs import RunReporter
    from lake_assets.cli.dev_s3 import S3Watch
    from lake_assets.cli.dev_status import serving_status
    from lake_assets.cli.session import REPO_ROOT, dagster_instance
    from lake_assets.resources.storage import LakeStorage
    from lake_assets.settings import LakeSettings

    settings = LakeSettings.from_env()
    instance = dagster_instance(settings)
    dagster_home = Path(instance.root_directory)
    reporter = RunReporter(instance)
    token_file = settings.home / TOKEN_FILE
    with LakeStorage.from_settings(settings).running() as storage, _token(token_file) as token, \
            serving_status(settings.home, storage):
        # chosen once the S3 server listens, so a free port is not one its servers are about to take
        web_port = _web_port(settings.web_port if port is None else port,
                             explicit=port is not None or settings.web_port_explicit)
        console.print(f"S3 {storage.endpoint_url} (bucket {storage.bucket}); "
                      f"Dagster UI http://127.0.0.1:{web_port}/?token={token} (the token is in {token_file}); "
                      f"DAGSTER_HOME {dagster_home}. Ctrl-C stops everything.", soft_wrap=True)
        process = subprocess.Popen(
            [sys.executable, "-m", "lake_assets.core.process_group",  # stops the whole tree, see there
             sys.executable, "-m", "lake_assets.cli.dev_services", str(REPO_ROOT / "workspace.yaml"),
             "--port", str(web_port), "--token-file", str(token_file), "--log-level", "info" if verbose else "warning"],
            # in DAGSTER_HOME, where Dagster's services look for dagster.yaml
            cwd=dagster_home, env={**os.environ, **_automation_env(), **({} if verbose else QUIET_ENV)},
            start_new_session=True,
            preexec_fn=_terminate_with_parent,
            stdout=None if verbose else subprocess.PIPE, stderr=None if verbose else subprocess.STDOUT, text=True,
        )
        stopping = threading.Event()
        if process.stdout is not None:  # quiet: the services' warnings and errors, not every run's log, and
            # nothing once they are being stopped (the daemon's ticks fail on the stopped code server then)
            forward(process.stdout, lambda line: None if stopping.is_set() else _print_line(line))
        try:
            _report_runs_until_exit(process, reporter, S3Watch(storage))
        except KeyboardInterrupt:
            console.print("stopping Dagster ...")
        finally:
            stopping.set()
            _stop_group(process)
            _print_lines(reporter)  # runs that finished since the last poll


def _web_port(requested: int, explicit: bool) -> int:
    """`requested`, or a free port when it is 0 or when the default is taken (a port asked for is that or a failure)."""
    from lake_assets.resources.ports import free_port, port_free, port_holder

    if requested == 0:
        return free_port()
    if explicit or port_free(requested):
        return requested
    errors.print(f"port {requested} is taken by {port_holder(requested)}; the Dagster UI uses a free port instead")
    return free_port()


@contextlib.contextmanager
def _token(path: Path) -> Iterator[str]:
    """A new token for this start, in an owner-only file (LAKE_HOME is 0700, the umask 077) until the end."""
    token = secrets.token_urlsafe(32)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    try:
        yield token
    finally:
        path.unlink(missing_ok=True)


def _automation_env() -> dict[str, str]:
    """Let the daemon read the update time of every web_sales partition a load wrote.

    Above 100 updated partitions per tick (Dagster's default) it falls back to the tick's
    time, logging one warning per report at every star load; our calendar is 2,191 days.
    """
    from lake_assets.tpcds.assets import DAILY

    return {"DAGSTER_MAX_PARTITIONS_FOR_DA_TIMESTAMP_FETCH": str(len(DAILY.get_partition_keys()))}


def _report_runs_until_exit(process: subprocess.Popen, reporter: "RunReporter", s3: "S3Watch") -> None:
    """Wait for the Dagster services to exit, printing a line for each run that finishes meanwhile,
    and starting the embedded S3 server again (saying so first) when it has stopped."""
    while True:
        try:
            process.wait(timeout=POLL_SECONDS)
            return
        except subprocess.TimeoutExpired:
            _print_lines(reporter)
        if (gone := s3.gone()) is not None:
            errors.print(f"the embedded S3 server stopped (weed pid {gone.pid}; its log: {s3.log}); "
                         "starting it again", soft_wrap=True)
            server = s3.start_again()
            console.print(f"S3 {server.endpoint} again (weed pid {server.pid})", soft_wrap=True)


def _print_lines(reporter: "RunReporter") -> None:
    for line in reporter.new_lines():
        _print_line(line)


def _print_line(line: str) -> None:
    console.print(line, highlight=False, markup=False, soft_wrap=True)


def _terminate_with_parent() -> None:
    """In the group leader, before exec: SIGTERM it when `lake dev` dies, even by SIGKILL."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop_group(process: subprocess.Popen) -> None:
    """SIGTERM the group's leader (core/process_group.py), which stops the Dagster services'
    tree (cli/dev_services.py with the webserver, the daemon, the code server) and SIGKILLs what
    is left after its grace period; SIGKILL the whole group after 30 s if the leader cannot.

    Only the leader is signalled: it signals the group once (a second SIGTERM reaching
    `dagster dev`, which ran here before, interrupted its shutdown: `Aborted!`).
    """
    try:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # members left behind (none when the leader did its job)
    process.wait()
