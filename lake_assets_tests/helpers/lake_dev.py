"""Run the installed `lake dev` in a scratch LAKE_HOME on free ports, as a user would."""

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from lake_assets.cli.dev import TOKEN_FILE
from lake_assets.resources.embedded_s3 import free_port
from lake_assets_tests.helpers.terminal import ctrl_c_reaches_it

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]


#: `lake dev`'s first line names the webserver's address; with LAKE_WEB_PORT=0 it is the only place the port is
UI_ADDRESS = re.compile(r"Dagster UI http://127\.0\.0\.1:(\d+)/")


def printed_web_port(log: Path) -> int | None:
    """The webserver's port from `lake dev`'s output so far, None before its first line."""
    found = UI_ADDRESS.search(log.read_text(errors="replace")) if log.exists() else None
    return int(found.group(1)) if found else None


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 1.0):
    """Poll `predicate` until it returns something truthy; fail naming `what` on time-out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@dataclass
class LakeDev:
    home: Path
    env: dict[str, str]
    web_port: int
    process: subprocess.Popen
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def lake(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """Run another `lake` command against this lake, the way a second terminal would."""
        return subprocess.run([str(BIN / "lake"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=REPO)

    @property
    def token(self) -> str:
        """The webserver's token `lake dev` made at start (it prints it in the UI's address, too)."""
        return (self.home / TOKEN_FILE).read_text().strip()

    @property
    def login_url(self) -> str:
        """The address `lake dev` prints: opening it sets the browser's cookie."""
        return f"{self.url}/?token={self.token}"

    def web_up(self) -> bool:
        return web_up(self.web_port, self.home)

    def idle(self) -> bool:
        """No run of this lake is queued, starting or running (its Dagster instance says)."""
        import dagster as dg

        active = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
                  dg.DagsterRunStatus.STARTED]
        previous = os.environ.get("DAGSTER_HOME")
        os.environ["DAGSTER_HOME"] = str(self.home / "dagster")  # its dagster.yaml reads it
        try:
            with dg.DagsterInstance.get() as instance:
                return instance.get_runs_count(dg.RunsFilter(statuses=active)) == 0
        finally:
            if previous is None:
                del os.environ["DAGSTER_HOME"]
            else:
                os.environ["DAGSTER_HOME"] = previous


def web_up(port: int, home: Path) -> bool:
    """True once `lake dev`'s webserver answers a request carrying its token."""
    try:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/server_info", headers={
            "Authorization": f"Bearer {(home / TOKEN_FILE).read_text().strip()}"})
        return urllib.request.urlopen(request, timeout=2).status == 200
    except OSError:  # no token file yet, or nothing listening
        return False


@contextlib.contextmanager
def lake_dev(tmp_path: Path, **extra_env: str) -> Iterator[LakeDev]:
    """Start `lake dev`, wait for its webserver, and stop it with Ctrl-C (SIGINT) afterwards."""
    home = tmp_path / "home"
    # lake dev picks the webserver's port once its S3 server listens (a port picked here could be taken meanwhile)
    env = {**os.environ, "LAKE_HOME": str(home), "LAKE_S3_PORT": str(free_port()), "LAKE_WEB_PORT": "0",
           **extra_env}
    for name in ("LAKE_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DAGSTER_HOME", "LAKE_S3_BUCKET"):
        env.pop(name, None)
    log_path = tmp_path / "dev.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([str(BIN / "lake"), "dev"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, cwd=REPO, preexec_fn=ctrl_c_reaches_it)
    try:
        web_port = wait_for(lambda: printed_web_port(log_path) or process.poll() is not None, 180,
                            "the first line of `lake dev`")
        assert process.poll() is None, log_path.read_text()[-3000:]
        dev = LakeDev(home, env, web_port, process, log_path)
        wait_for(dev.web_up, 180, "the Dagster webserver of `lake dev`")
        yield dev
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
