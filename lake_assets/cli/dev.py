"""`lake dev`: the Dagster webserver and daemon with the embedded S3, until Ctrl-C or SIGTERM.

The terminal stays quiet: Dagster's services log at WARNING (errors still show), runs' own
log lines are left out (cli/dev_output.py), and `lake dev` prints one line per finished run
(cli/dev_runs.py); `--verbose` shows everything, Dagster's INFO logs (every sensor tick) and
each run's log lines included.
"""

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.dev_output import forward
from lake_assets.cli.output import console, errors
from lake_assets.cli.session import REPO_ROOT, dagster_instance
from lake_assets.resources.ports import free_port, port_free, port_holder
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings

if TYPE_CHECKING:
    from lake_assets.cli.dev_runs import RunReporter

_PR_SET_PDEATHSIG = 1
#: Without --verbose: no Python warnings (Dagster's beta/supersession notices at every import).
QUIET_ENV = {"PYTHONWARNINGS": "ignore"}
#: How often the terminal looks for finished runs.
POLL_SECONDS = 2.0


@app.command()
@friendly
def dev(
    port: Annotated[int | None, typer.Option(help="webserver port (default LAKE_WEB_PORT or 3000)")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="also show Dagster's INFO logs (every sensor tick) and each run's log lines")]
    = False,
) -> None:
    """Dagster webserver and daemon on 127.0.0.1 with the sensors running, plus the embedded S3.

    Holds a lease on the embedded S3 server for its whole life, so no command stops it
    meanwhile; Ctrl-C, SIGTERM or even SIGKILL of `lake dev` stops the Dagster processes.
    Prints one line per finished run; `--verbose` adds Dagster's own INFO logs and each run's log lines.
    """
    from lake_assets.cli.dev_runs import RunReporter

    settings = LakeSettings.from_env()
    instance = dagster_instance(settings)
    dagster_home = Path(instance.root_directory)
    reporter = RunReporter(instance)
    web_port = port or settings.web_port
    if not (port or settings.web_port_explicit or port_free(web_port)):  # the default is taken: another lake's?
        errors.print(f"port {web_port} is taken by {port_holder(web_port)}; the Dagster UI uses a free port instead")
        web_port = free_port()
    with LakeStorage.from_settings(settings).running() as storage:
        console.print(f"S3 {storage.endpoint_url} (bucket {storage.bucket}); Dagster UI http://127.0.0.1:{web_port}; "
                      f"DAGSTER_HOME {dagster_home}. Ctrl-C stops everything.")
        process = subprocess.Popen(
            [sys.executable, "-m", "lake_assets.core.process_group",  # stops the whole tree, see there
             str(Path(sys.executable).with_name("dagster")), "dev", "-w", str(REPO_ROOT / "workspace.yaml"),
             "-h", "127.0.0.1", "-p", str(web_port), *([] if verbose else ["--log-level", "warning"])],
            # in DAGSTER_HOME, so `dagster dev` does not warn about the repository's dagster.yaml
            cwd=dagster_home, env={**os.environ, **_automation_env(), **({} if verbose else QUIET_ENV)},
            start_new_session=True,
            preexec_fn=_terminate_with_parent,
            stdout=None if verbose else subprocess.PIPE, stderr=None if verbose else subprocess.STDOUT, text=True,
        )
        if process.stdout is not None:  # quiet: the services' warnings and errors, not every run's log
            forward(process.stdout, _print_line)
        try:
            _report_runs_until_exit(process, reporter)
        except KeyboardInterrupt:
            console.print("stopping Dagster ...")
        finally:
            _stop_group(process)
            _print_lines(reporter)  # runs that finished since the last poll


def _automation_env() -> dict[str, str]:
    """Let the daemon read the update time of every web_sales partition a load wrote.

    Above 100 updated partitions per tick (Dagster's default) it falls back to the tick's
    time, logging one warning per report at every star load; our calendar is 2,191 days.
    """
    from lake_assets.tpcds.assets import DAILY

    return {"DAGSTER_MAX_PARTITIONS_FOR_DA_TIMESTAMP_FETCH": str(len(DAILY.get_partition_keys()))}


def _report_runs_until_exit(process: subprocess.Popen, reporter: "RunReporter") -> None:
    """Wait for `dagster dev` to exit, printing a line for each run that finishes meanwhile."""
    while True:
        try:
            process.wait(timeout=POLL_SECONDS)
            return
        except subprocess.TimeoutExpired:
            _print_lines(reporter)


def _print_lines(reporter: "RunReporter") -> None:
    for line in reporter.new_lines():
        _print_line(line)


def _print_line(line: str) -> None:
    console.print(line, highlight=False, markup=False, soft_wrap=True)


def _terminate_with_parent() -> None:
    """In the group leader, before exec: SIGTERM it when `lake dev` dies, even by SIGKILL."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop_group(process: subprocess.Popen) -> None:
    """SIGTERM the group's leader (core/process_group.py), which stops `dagster dev`'s tree
    (webserver, daemon, code server) and SIGKILLs what is left after its grace period; SIGKILL
    the whole group after 30 s if the leader cannot.

    Only the leader is signalled: a second SIGTERM reaching `dagster dev` while it shuts its
    services down interrupts that shutdown (it printed `Aborted!` and left them to the leader).
    """
    try:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # members left behind (none when the leader did its job)
    process.wait()
