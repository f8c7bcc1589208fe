"""`lake dev`: the Dagster webserver and daemon with the embedded S3, until Ctrl-C or SIGTERM."""

import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import console, errors
from lake_assets.cli.session import REPO_ROOT, dagster_instance
from lake_assets.resources.ports import free_port, port_free, port_holder
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings

_PR_SET_PDEATHSIG = 1


@app.command()
@friendly
def dev(port: Annotated[int | None, typer.Option(help="webserver port (default LAKE_WEB_PORT or 3000)")] = None) -> None:
    """Dagster webserver and daemon on 127.0.0.1 with the sensors running, plus the embedded S3.

    Holds a lease on the embedded S3 server for its whole life, so no command stops it
    meanwhile; Ctrl-C, SIGTERM or even SIGKILL of `lake dev` stops the Dagster processes.
    """
    settings = LakeSettings.from_env()
    dagster_home = Path(dagster_instance(settings).root_directory)
    web_port = port or settings.web_port
    if not (port or settings.web_port_explicit or port_free(web_port)):  # the default is taken: another lake's?
        errors.print(f"port {web_port} is taken by {port_holder(web_port)}; the Dagster UI uses a free port instead")
        web_port = free_port()
    with LakeStorage.from_settings(settings).running() as storage:
        console.print(f"S3 {storage.endpoint_url} (bucket {storage.bucket}); Dagster UI http://127.0.0.1:{web_port}; "
                      f"DAGSTER_HOME {dagster_home}. Ctrl-C stops everything.")
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("dagster")), "dev", "-w", str(REPO_ROOT / "workspace.yaml"),
             "-h", "127.0.0.1", "-p", str(web_port)],
            cwd=REPO_ROOT, env=os.environ.copy(), start_new_session=True, preexec_fn=_terminate_with_parent,
        )
        try:
            process.wait()
        except KeyboardInterrupt:
            console.print("stopping Dagster ...")
        finally:
            _stop_group(process)


def _terminate_with_parent() -> None:
    """In the `dagster dev` child, before exec: SIGTERM it when `lake dev` dies, even by SIGKILL."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop_group(process: subprocess.Popen) -> None:
    """SIGTERM the `dagster dev` process group (webserver, daemon, code server), SIGKILL after 30 s."""
    try:
        os.killpg(process.pid, signal.SIGTERM)  # also reaches members left after the leader exited
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
