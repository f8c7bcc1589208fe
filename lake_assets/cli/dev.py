"""`lake dev`: the Dagster webserver and daemon with the embedded S3, until Ctrl-C."""

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import console
from lake_assets.cli.session import REPO_ROOT, prepare_dagster_home
from lake_assets.resources.embedded_s3 import embedded_s3
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings, s3_credentials


@app.command()
@friendly
def dev(port: Annotated[int | None, typer.Option(help="webserver port (default LAKE_WEB_PORT or 3000)")] = None) -> None:
    """Dagster webserver and daemon on 127.0.0.1 with the sensors running, plus the embedded S3."""
    settings = LakeSettings.from_env()
    dagster_home = prepare_dagster_home(settings)
    storage = LakeStorage.from_settings(settings)
    web_port = port or settings.web_port
    with (embedded_s3(settings.home, settings.s3_port, *s3_credentials(True)) if storage.embedded
          else _external(storage.endpoint)) as endpoint:
        storage.with_endpoint(endpoint).ensure_bucket()
        console.print(f"S3 {endpoint} (bucket {storage.bucket}); Dagster UI http://127.0.0.1:{web_port}; "
                      f"DAGSTER_HOME {dagster_home}. Ctrl-C stops everything.")
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("dagster")), "dev", "-w", str(REPO_ROOT / "workspace.yaml"),
             "-h", "127.0.0.1", "-p", str(web_port)],
            cwd=REPO_ROOT, env=os.environ.copy(), start_new_session=True,
        )
        try:
            process.wait()
        except KeyboardInterrupt:
            console.print("stopping Dagster ...")
        finally:
            _stop_group(process)


def _external(endpoint: str) -> contextlib.AbstractContextManager[str]:
    return contextlib.nullcontext(endpoint)


def _stop_group(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
