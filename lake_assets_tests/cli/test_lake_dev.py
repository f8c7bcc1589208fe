"""`lake dev` end to end: UI up on 127.0.0.1, a CDC file put into S3 shows in `lake query`
within seconds via the sensor and the daemon, and Ctrl-C stops everything it started."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from lake_assets.resources.embedded_s3 import free_port, running_server
from lake_assets.core.processes import command_line, pid_alive
from lake_assets_tests.conftest import DATA
from lake_assets_tests.helpers.permissions import open_to_others
from lake_assets_tests.helpers.terminal import ctrl_c_reaches_it

BIN = Path(sys.executable).parent


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _web_up(port: int) -> bool:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2).status == 200
    except OSError:
        return False


#: `lake dev`'s line for the sensor's run of the two files the test puts.
RUN_LINE = re.compile(r"^\d\d:\d\d:\d\d run \w{8} apply_insurance SUCCESS [\d.]+ s -> insurance.* "
                      r"\(raw_insurance_sensor, \d files?\)$", re.MULTILINE)
RUN_FILES = re.compile(r"^\d\d:\d\d:\d\d run \w{8} apply_insurance SUCCESS .*\(raw_insurance_sensor, (\d) files?\)$",
                       re.MULTILINE)


@pytest.mark.e2e
def test_lake_dev_applies_a_put_file_within_seconds_and_stops_cleanly(tmp_path: Path) -> None:
    web_port = free_port()
    env = {**os.environ, "LAKE_HOME": str(tmp_path / "home"), "LAKE_S3_PORT": str(free_port()),
           "LAKE_WEB_PORT": str(web_port), "LAKE_SENSOR_INTERVAL_SECONDS": "1"}
    for name in ("LAKE_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DAGSTER_HOME"):
        env.pop(name, None)
    log = open(tmp_path / "dev.log", "wb")
    dev = subprocess.Popen([str(BIN / "lake"), "dev"], env=env, stdout=log, stderr=subprocess.STDOUT,
                           start_new_session=True, preexec_fn=ctrl_c_reaches_it)
    try:
        _wait(lambda: _web_up(web_port), 120, "the Dagster webserver")
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

        _wait(applied, 150, "the CDC file to be applied by the sensor-launched run")
        elapsed = time.monotonic() - put_at
        print(f"put -> visible in lake query: {elapsed:.1f} s")
        status = json.loads(lake("status", "--format", "json").stdout)
        assert {row["status"] for row in status} == {"applied"}
        # one line per finished run (the row is visible before the run's checks end): wait until the
        # finished runs' lines name both files, so no run is still in flight when lake dev is stopped
        _wait(lambda: sum(map(int, RUN_FILES.findall((tmp_path / "dev.log").read_text()))) >= 2, 90,
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
    assert "Aborted!" not in terminal, terminal  # `dagster dev` shut its services down uninterrupted
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
    web_port = free_port()
    home = tmp_path / "home"
    env = {**os.environ, "LAKE_HOME": str(home), "LAKE_S3_PORT": str(free_port()), "LAKE_WEB_PORT": str(web_port)}
    for name in ("LAKE_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DAGSTER_HOME"):
        env.pop(name, None)
    log = open(tmp_path / "dev.log", "wb")
    dev = subprocess.Popen([str(BIN / "lake"), "dev"], env=env, stdout=log, stderr=subprocess.STDOUT)
    tree: set[int] = set()
    try:
        _wait(lambda: _web_up(web_port), 300, "the Dagster webserver")
        server = running_server(home)
        tree = _descendants(dev.pid)
        assert server is not None and len(tree) >= 3, tree  # dagster dev, webserver, daemon, code server
        dev.send_signal(sig)
        dev.wait(timeout=60)
        if sig == signal.SIGTERM:
            assert dev.returncode == 0  # a clean stop, as with Ctrl-C
        try:
            _wait(lambda: not any(pid_alive(pid) for pid in tree), 60, f"the dagster dev tree to stop after {sig.name}")
        except AssertionError as error:  # name the survivors, so a failure says which process outlived its parent
            survivors = {pid: command_line(pid)[:160] for pid in tree if pid_alive(pid)}
            raise AssertionError(f"{error}: {survivors}") from None
        _wait(lambda: not pid_alive(server.pid) and running_server(home) is None, 30, "the S3 server to stop")
        assert not any(Path(s).exists() for s in server.sockets)
    finally:
        for pid in (_descendants(dev.pid) if dev.poll() is None else set()) | {p for p in tree if pid_alive(p)}:
            os.kill(pid, signal.SIGKILL)
        if dev.poll() is None:
            dev.kill()
        log.close()
