"""`lake dev` end to end: UI up on 127.0.0.1, a CDC file put into S3 shows in `lake query`
within seconds via the sensor and the daemon, and Ctrl-C stops everything it started."""

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from lake_assets.cli.dev_status import SOCKET_FILE

from lake_assets.resources.embedded_s3 import free_port, running_server
from lake_assets.core.processes import command_line, pid_alive
from lake_assets_tests.conftest import DATA
from lake_assets_tests.helpers.lake_dev import LakeDev, lake_dev, printed_web_port, wait_for, web_up
from lake_assets_tests.helpers.permissions import open_to_others
from lake_assets_tests.helpers.terminal import ctrl_c_reaches_it

BIN = Path(sys.executable).parent


#: `lake dev`'s line for the sensor's run of the two files the test puts.
RUN_LINE = re.compile(r"^\d\d:\d\d:\d\d run \w{8} apply_insurance SUCCESS [\d.]+ s -> insurance.*: "
                      r"files [12] applied, 0 refused, 0 held; rows [1-9]\d* applied, \d+ superseded, 0 quarantined "
                      r"\(raw_insurance_sensor, \d files?\)$", re.MULTILINE)
#: The files each finished sensor run applied (a file put while the run was queued goes with it).
RUN_FILES = re.compile(r"^\d\d:\d\d:\d\d run \w{8} apply_insurance SUCCESS .*: files (\d+) applied, .*"
                       r"\(raw_insurance_sensor, \d+ files?\)$", re.MULTILINE)


@pytest.mark.e2e
def test_lake_dev_applies_a_put_file_within_seconds_and_stops_cleanly(tmp_path: Path) -> None:
    env = {**os.environ, "LAKE_HOME": str(tmp_path / "home"), "LAKE_S3_PORT": str(free_port()),
           "LAKE_WEB_PORT": "0", "LAKE_SENSOR_INTERVAL_SECONDS": "1"}
    for name in ("LAKE_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DAGSTER_HOME"):
        env.pop(name, None)
    log = open(tmp_path / "dev.log", "wb")
    dev = subprocess.Popen([str(BIN / "lake"), "dev"], env=env, stdout=log, stderr=subprocess.STDOUT,
                           start_new_session=True, preexec_fn=ctrl_c_reaches_it)
    try:
        web_port = wait_for(lambda: printed_web_port(tmp_path / "dev.log"), 120, "the first line of lake dev")
        wait_for(lambda: web_up(web_port, tmp_path / "home"), 120, "the Dagster webserver")
        server = running_server(tmp_path / "home")
        assert server is not None and server.endpoint.startswith("http://127.0.0.1:")

        def lake(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([str(BIN / "lake"), *args], env=env, capture_output=True, text=True, timeout=120)

        assert lake("put", str(DATA / "fullload" / "full-load.csv"), "--to", "fullload").returncode == 0
        assert lake("put", str(DATA / "cdcload" / "20240401-090000000.csv"), "--to", "cdcload").returncode == 0
        put_at = time.monotonic()

        def applied() -> bool:
            result = lake("query", "SELECT insured_value FROM insurance WHERE policy_id = 100463", "--format", "json")
            return result.returncode == 0 and json.loads(result.stdout) == [{"insured_value": 1000000}]

        wait_for(applied, 150, "the CDC file to be applied by the sensor-launched run")
        elapsed = time.monotonic() - put_at
        print(f"put -> visible in lake query: {elapsed:.1f} s")

        # the ledger is written last, after the feed and the history: the rows are visible first
        def statuses() -> set[str]:
            return {row["status"] for row in json.loads(lake("status", "--format", "json").stdout)}

        wait_for(lambda: "pending" not in statuses(), 60, "lake status to account for both files")
        assert statuses() == {"applied"}
        assert (tmp_path / "home" / SOCKET_FILE).exists()  # that answer came from lake dev's process
        # one line per finished run (the row is visible before the run's checks end): wait until the
        # finished runs' lines account for both files applied, so no run is still in flight when lake dev is stopped
        wait_for(lambda: sum(map(int, RUN_FILES.findall((tmp_path / "dev.log").read_text()))) >= 2, 90,
              "lake dev's lines for the finished runs of both files")
    finally:
        os.killpg(dev.pid, signal.SIGINT)
        try:
            dev.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait()
        log.close()
    assert running_server(tmp_path / "home") is None, (tmp_path / "dev.log").read_text()[-3000:]
    # Dagster's run databases, event logs and the S3 data, written under `lake dev`: all owner-only
    assert open_to_others(tmp_path / "home") == []
    terminal = (tmp_path / "dev.log").read_text()
    # quiet by default: one line per run (a sensor tick logs nothing), no Dagster INFO/DEBUG lines
    assert RUN_LINE.search(terminal), terminal
    assert "Aborted!" not in terminal and "Traceback" not in terminal, terminal  # the services stopped quietly
    assert " - INFO - " not in terminal and " - DEBUG - " not in terminal and "Warning" not in terminal, terminal


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid` (by parent PID), whatever its session or group."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(proc.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


@pytest.mark.e2e
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killing_lake_dev_takes_dagster_and_the_s3_server_with_it(tmp_path: Path, sig: signal.Signals) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "LAKE_HOME": str(home), "LAKE_S3_PORT": str(free_port()), "LAKE_WEB_PORT": "0"}
    for name in ("LAKE_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DAGSTER_HOME"):
        env.pop(name, None)
    log = open(tmp_path / "dev.log", "wb")
    dev = subprocess.Popen([str(BIN / "lake"), "dev"], env=env, stdout=log, stderr=subprocess.STDOUT)
    tree: set[int] = set()
    try:
        web_port = wait_for(lambda: printed_web_port(tmp_path / "dev.log"), 300, "the first line of lake dev")
        wait_for(lambda: web_up(web_port, home), 300, "the Dagster webserver")
        server = running_server(home)
        tree = _descendants(dev.pid)
        assert server is not None and len(tree) >= 3, tree  # the group's leader, the services with the webserver, daemon, code server
        dev.send_signal(sig)
        dev.wait(timeout=60)
        if sig == signal.SIGTERM:
            assert dev.returncode == 0  # a clean stop, as with Ctrl-C
        try:
            wait_for(lambda: not any(pid_alive(pid) for pid in tree), 60, f"the Dagster services' tree to stop after {sig.name}")
        except AssertionError as error:  # name the survivors, so a failure says which process outlived its parent
            survivors = {pid: command_line(pid)[:160] for pid in tree if pid_alive(pid)}
            raise AssertionError(f"{error}: {survivors}") from None
        wait_for(lambda: not pid_alive(server.pid) and running_server(home) is None, 30, "the S3 server to stop")
        assert not any(Path(s).exists() for s in server.sockets)
    finally:
        for pid in (_descendants(dev.pid) if dev.poll() is None else set()) | {p for p in tree if pid_alive(p)}:
            os.kill(pid, signal.SIGKILL)
        if dev.poll() is None:
            dev.kill()
        log.close()


@pytest.fixture(scope="module")
def running_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LakeDev]:
    """One `lake dev` for the tests below (each start costs a minute on this machine)."""
    with lake_dev(tmp_path_factory.mktemp("dev")) as dev:
        yield dev


#: The launch one unauthenticated POST sent to roll `insurance` back, before the token.
LAUNCH_RESTORE = ('mutation { launchRun(executionParams: {selector: {repositoryLocationName: "lake", '
                  'repositoryName: "__repository__", jobName: "restore_table_job"}, runConfigData: {}}) '
                  '{ __typename } }')
RUN_IDS = "{ runsOrError { ... on Runs { results { runId } } } }"


def _post(dev: LakeDev, query: str, **headers: str) -> tuple[int, str]:
    """Status and body of a GraphQL POST to `lake dev`'s webserver."""
    request = urllib.request.Request(f"{dev.url}/graphql", data=json.dumps({"query": query}).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _websocket_handshake(dev: LakeDev, **headers: str) -> int:
    """The status the webserver answers a websocket handshake on /graphql with (101: switching protocols)."""
    connection = http.client.HTTPConnection("127.0.0.1", dev.web_port, timeout=10)
    try:
        connection.request("GET", "/graphql", headers={
            "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "graphql-ws", **headers})
        return connection.getresponse().status
    finally:
        connection.close()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


@pytest.mark.e2e
def test_the_ui_answers_only_with_the_token(running_dev: LakeDev) -> None:
    dev = running_dev
    # no token, a wrong one, a websocket without one: refused before Dagster sees them
    assert _post(dev, LAUNCH_RESTORE)[0] == 401
    assert _post(dev, LAUNCH_RESTORE, Authorization="Bearer not-the-token")[0] == 401
    assert _post(dev, LAUNCH_RESTORE, Cookie=f"lake_dev_{dev.web_port}=not-the-token")[0] == 401
    assert _websocket_handshake(dev) == 403  # GraphQL subscriptions
    assert _websocket_handshake(dev, Authorization=f"Bearer {dev.token}") == 101
    # the address lake dev printed sets the cookie; the cookie works from the UI's own pages only
    assert f"Dagster UI {dev.login_url} " in dev.log.read_text()
    with pytest.raises(urllib.error.HTTPError) as login:
        urllib.request.build_opener(_NoRedirect).open(f"{dev.login_url}", timeout=10)
    assert login.value.code == 303 and login.value.headers["Location"] == "/"
    cookie = login.value.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert _post(dev, RUN_IDS, Cookie=cookie.split(";")[0], Origin=dev.url)[0] == 200
    assert _post(dev, RUN_IDS, Cookie=cookie.split(";")[0], Origin="http://127.0.0.1:1")[0] == 403
    assert _post(dev, RUN_IDS, Cookie=cookie.split(";")[0], **{"Sec-Fetch-Site": "same-site"})[0] == 403
    # the token works (scripts: Authorization: Bearer), and the refused launch launched nothing
    status, body = _post(dev, RUN_IDS, Authorization=f"Bearer {dev.token}")
    assert status == 200 and json.loads(body)["data"]["runsOrError"]["results"] == [], body


def _state(pid: int) -> str | None:
    """The process's state letter in /proc (Z: a zombie), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


@pytest.mark.e2e
def test_a_killed_s3_server_is_reported_at_once_and_started_again(running_dev: LakeDev) -> None:
    dev = running_dev
    before = running_server(dev.home)
    assert before is not None
    os.kill(before.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    wait_for(lambda: "the embedded S3 server stopped" in dev.log.read_text(), 30, "lake dev to say S3 stopped",
             interval=0.2)
    said_after = time.monotonic() - killed_at
    after = wait_for(lambda: running_server(dev.home), 60, "the S3 server to run again", interval=0.5)
    assert said_after < 5, f"lake dev said it after {said_after:.1f} s"
    assert after.pid != before.pid and f"S3 {after.endpoint} again" in dev.log.read_text()
    # started by lake dev itself (its supervisor is lake dev's child), not by a later command
    assert int(Path(f"/proc/{after.supervisor_pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) == dev.process.pid
    wait_for(lambda: _state(before.supervisor_pid) is None, 10, "the old supervisor to be reaped (no zombie)",
             interval=0.5)
    query = dev.lake("query", "SELECT 1 AS one", "--format", "csv")  # S3 answers: the command reads through it
    assert query.returncode == 0 and query.stdout.split() == ["one", "1"], query.stderr
    assert running_server(dev.home).pid == after.pid  # the command used the server lake dev started
