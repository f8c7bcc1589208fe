"""No port of the embedded S3 server gives access without the lake's credentials.

Every TCP port the `weed` process listens on (found in /proc, not from a list) is probed
without credentials: reads, writes, deletes and listings over HTTP (filer-, S3-, volume- and
master-style URLs), the status pages and UIs of every component over HTTP and HTTPS without
the server's client certificate, and gRPC without it. Only the S3 API with the keys, and the
Iceberg REST catalog with a token bought with the keys, get in; the one page weed 4.48
cannot close is the S3 gateway's empty liveness reply.
"""

import time

import json
import os
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from lake_assets.resources.embedded_s3 import EmbeddedS3
from lake_assets.resources.ports import listening_ports
from lake_assets.resources.storage import LakeStorage

SECRET_BODY = b"policy_id,insured_value\n424242,31337\n"


def http(method: str, url: str, body: bytes | None = None) -> tuple[int | str, bytes]:
    request = urllib.request.Request(url, method=method, data=body)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        try:  # a TLS port answering plain HTTP sends its 400 and resets the connection
            return error.code, error.read()
        except OSError:
            return error.code, b""
    except (OSError, http_client_errors()) as error:
        return "refused", repr(error).encode()


def http_client_errors() -> type[Exception]:
    import http.client

    return http.client.HTTPException


def probes(bucket: str, key: str, fid: str) -> list[tuple[str, str, bytes | None]]:
    """(method, path, body) of unauthenticated requests that would read, list, write or delete."""
    filer_path = f"/buckets/{bucket}/{key}"
    folder = f"/buckets/{bucket}/raw/"
    return [
        ("GET", filer_path, None), ("GET", folder, None), ("GET", folder + "?pretty=y", None),
        ("GET", f"/{bucket}/{key}", None), ("GET", f"/{bucket}?list-type=2", None), ("GET", "/", None),
        ("GET", f"/{fid}", None), ("GET", f"/dir/lookup?volumeId={fid.split(',')[0]}", None),
        ("GET", "/dir/assign", None), ("GET", "/vol/status", None), ("GET", "/dir/status", None),
        ("GET", "/v1/namespaces", None), ("GET", "/v1/namespaces/default/tables", None),
        ("PUT", f"/buckets/{bucket}/raw/cdcload/intruder.csv", b"policy_id\n1\n"),
        ("POST", f"/buckets/{bucket}/raw/cdcload/", b"policy_id\n1\n"),
        ("PUT", f"/{bucket}/raw/cdcload/intruder2.csv", b"policy_id\n1\n"),
        ("PUT", f"/{fid}", b"overwritten"), ("POST", f"/{fid}", b"overwritten"),
        ("DELETE", filer_path, None), ("DELETE", f"/{bucket}/{key}", None), ("DELETE", f"/{fid}", None),
        ("DELETE", f"/buckets/{bucket}?recursive=true", None),
        ("GET", f"/col/delete?collection={bucket}", None), ("POST", "/v1/namespaces", b'{"namespace":["x"]}'),
    ]


#: Status pages and UIs of weed's components (master, volume, filer, admin, metrics, pprof).
STATUS_PAGES = ("/", "/cluster/status", "/cluster/healthz", "/status", "/healthz", "/health", "/dir/status",
                "/vol/status", "/metrics", "/ui/index.html", "/debug/pprof/", "/v1/config")
#: What weed 4.48 answers before authentication, by listener: the S3 gateway's liveness checks
#: (an empty 200) and the Iceberg REST spec's client configuration (empty unless the caller names
#: a warehouse, which it then echoes back). Nothing else, and exactly these bodies.
PUBLIC_REPLIES = {("s3", "/status"): b"", ("s3", "/healthz"): b"",
                  ("iceberg", "/v1/config"): b'{"defaults":{},"overrides":{}}\n'}


def get_without_credentials(url: str) -> tuple[int | str, bytes]:
    """GET over HTTP, or HTTPS without a client certificate (and without checking the server's)."""
    context = None
    if url.startswith("https"):
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (OSError, http_client_errors()) as error:
        return "refused", repr(error).encode()


def every_port_listening(server: EmbeddedS3) -> list[int]:
    """The weed process's listening ports once all of them are up (the admin starts last)."""
    deadline = time.monotonic() + 20
    while len(ports := listening_ports(server.pid)) < len(server.ports) and time.monotonic() < deadline:
        time.sleep(0.2)
    return ports


def grpc_speaks_without_certificate(port: int) -> bool:
    """True if the port completes an HTTP/2 exchange without a client certificate (plain or TLS)."""
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as raw:
            raw.sendall(preface)
            if raw.recv(9)[3:4] == b"\x04":  # a SETTINGS frame back: it speaks cleartext HTTP/2
                return True
    except OSError:
        pass
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as raw, \
                context.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(preface)
            return tls.recv(9)[3:4] == b"\x04"
    except (OSError, ssl.SSLError):
        return False


def test_no_port_gives_access_without_the_lakes_credentials(s3_server: EmbeddedS3, storage: LakeStorage) -> None:
    key = "raw/fullload/secret.csv"
    storage.put_bytes(key, SECRET_BODY)
    fid = "1,01637037d6"  # a volume file id; the volume server must refuse it before looking it up
    ports = every_port_listening(s3_server)
    assert s3_server.ports["s3"] in ports and s3_server.ports["filer"] in ports and len(ports) >= 8, ports
    leaks = []
    for port in ports:
        for method, path, body in probes(storage.bucket, key, fid):
            status, content = http(method, f"http://127.0.0.1:{port}{path}", body)
            if b"424242" in content or (b"secret.csv" in content and "secret.csv" not in path):
                leaks.append(f"{port} {method} {path}: {status} leaks the object or its name")
            if isinstance(status, int) and 200 <= status < 300 and method in ("PUT", "POST", "DELETE"):
                leaks.append(f"{port} {method} {path}: {status} accepted")
        if port not in (s3_server.ports["s3"], s3_server.ports["iceberg"]) and grpc_speaks_without_certificate(port):
            leaks.append(f"{port}: gRPC answers a client without the server's certificate")
    assert leaks == []
    # nothing was written, changed or deleted: the S3 API with the keys sees the same bucket
    assert storage.get_bytes(key)[0] == SECRET_BODY
    assert [o["Key"] for o in storage.list_objects("")] == [key]


def test_no_port_serves_a_page_without_credentials(s3_server: EmbeddedS3) -> None:
    ports = every_port_listening(s3_server)
    # weed listens on the ports recorded in the state file and no others (no metrics or debug port)
    assert sorted(ports) == sorted(s3_server.ports.values()), (ports, s3_server.ports)
    names = {port: name for name, port in s3_server.ports.items()}
    pages = []
    for port in ports:
        for scheme in ("http", "https"):
            for path in STATUS_PAGES:
                status, body = get_without_credentials(f"{scheme}://127.0.0.1:{port}{path}")
                if scheme == "http" and PUBLIC_REPLIES.get((names[port], path)) == body:
                    continue  # the documented exceptions, with nothing in them
                if isinstance(status, int) and status < 400:
                    pages.append(f"{scheme}://127.0.0.1:{port}{path}: {status} {body[:60]!r}")
    assert pages == []


def test_every_port_binds_loopback_only(s3_server: EmbeddedS3) -> None:
    ports = every_port_listening(s3_server)
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) in ports:
                addresses.add(local.rsplit(":", 1)[0])
    assert addresses == {"0100007F"}  # 127.0.0.1, nothing on 0.0.0.0 or ::


def test_the_s3_api_and_the_iceberg_catalog_work_with_the_keys(s3_server: EmbeddedS3, storage: LakeStorage) -> None:
    storage.put_bytes("raw/cdcload/a.csv", b"x")
    assert storage.get_bytes("raw/cdcload/a.csv")[0] == b"x"
    key, secret = storage.credentials()
    catalog = s3_server.iceberg_endpoint
    assert http("GET", f"{catalog}/v1/namespaces")[0] in (401, 403)
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": key, "client_secret": secret})
    status, body = http("POST", f"{catalog}/v1/oauth/tokens", form.encode())
    assert status == 200, body
    token = json.loads(body)["access_token"]
    request = urllib.request.Request(f"{catalog}/v1/namespaces", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status = response.status
    except urllib.error.HTTPError as error:
        status = error.code  # 404 until a table bucket (warehouse) exists: past authentication
    assert status not in (401, 403)
    wrong = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": key, "client_secret": "guess"})
    assert http("POST", f"{catalog}/v1/oauth/tokens", wrong.encode())[0] in (400, 401, 403)


def test_server_files_are_owner_only(s3_server: EmbeddedS3, lake_home: Path) -> None:
    server_files = [lake_home / name for name in ("s3-server.json", "s3-server.log", "s3-server.lock",
                                                  "s3-credentials.json", "s3-leases")]
    for root, directories, files in os.walk(lake_home / "s3"):  # weed's volumes, indexes and options
        server_files += [Path(root, name) for name in directories + files]
    for path in (lake_home, Path(s3_server.run_dir), *Path(s3_server.run_dir).iterdir(), *server_files):
        assert path.stat().st_mode & 0o077 == 0, f"{path} is {oct(path.stat().st_mode)}"
    for socket_path in s3_server.sockets:
        if Path(socket_path).exists():
            assert Path(socket_path).stat().st_mode & 0o077 == 0, socket_path


@pytest.fixture(autouse=True)
def _keys_from_the_lake(monkeypatch: pytest.MonkeyPatch) -> None:
    """Use the lake's generated pair (what a user without AWS_* set gets)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
