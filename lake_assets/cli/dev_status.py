"""`lake status` answered by a running `lake dev`, the way a database CLI asks its server.

`lake dev` keeps the object store, the ledger reader and every import warm for as long as it
runs; a `lake status` of its own would pay for all of them again (most of its time). So `lake
dev` listens on a unix socket in LAKE_HOME (`SOCKET_FILE`: owner-only, as LAKE_HOME is), and
`lake status` asks there first: one JSON line out (the lake it means), one JSON document back
(every raw object's status, computed by the same `core/raw_status.py` a command computes it
with). The ledger is read again only when its Delta version changed since the last answer; the
raw zone is listed for every answer. No `lake dev`, another lake (bucket, tables directory), or
no answer: the command computes the status itself.
"""

import contextlib
import json
import os
import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lake_assets.core.errors import LakeError

if TYPE_CHECKING:
    from lake_assets.resources.storage import LakeStorage

SOCKET_FILE = "lake-dev.sock"
#: How long `lake status` waits for `lake dev`'s answer before computing it itself.
ANSWER_SECONDS = 60.0


def lake_identity(bucket: str) -> dict[str, str]:
    """What a status answer depends on besides LAKE_HOME: the bucket and the declarations' directory."""
    return {"bucket": bucket, "tables_dir": os.environ.get("LAKE_TABLES_DIR", "")}


def ask(home: Path, identity: dict[str, str], timeout: float = ANSWER_SECONDS) -> list[dict] | None:
    """Every raw object's status from the `lake dev` running on `home`, or None when there is none
    to ask (or it serves another lake). Raises LakeError with its one-line error if it had one."""
    path = home / SOCKET_FILE
    if not path.exists():
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(timeout)
            client.connect(str(path))
            client.sendall(json.dumps({"ask": "status", **identity}).encode() + b"\n")
            client.shutdown(socket.SHUT_WR)
            answer = json.loads(b"".join(iter(lambda: client.recv(1 << 16), b"")) or b"{}")
    except (OSError, ValueError):  # nobody listening (a `lake dev` that was killed), or it stopped mid-answer
        return None
    if "error" in answer:
        raise LakeError(answer["error"])
    return answer.get("files")


class _LatestEntries:
    """The ledger's latest entries, read again only when the ledger's version changed."""

    def __init__(self, storage: "LakeStorage") -> None:
        self._storage = storage
        self._table: Any = None  # the ledger's DeltaTable, once it exists
        self._version: int | None = None
        self._latest: dict = {}
        self._lock = threading.Lock()

    def get(self) -> dict:
        from lake_assets.core.formats.delta import open_table
        from lake_assets.core.ledger import Ledger
        from lake_assets.core.tables import LEDGER

        with self._lock:
            if self._table is None:
                self._table = open_table(self._storage, LEDGER)
            else:
                self._table.update_incremental()  # reads only the log entries after the version it has
            version = self._table.version() if self._table is not None else None
            if version != self._version:
                self._latest = Ledger(self._storage).latest_by_table() if version is not None else {}
                self._version = version
            return self._latest


class _Handler(socketserver.StreamRequestHandler):
    server: "_Server"

    def handle(self) -> None:
        try:
            request = json.loads(self.rfile.readline() or b"{}")
            answer = self.server.answer(request)
        except Exception as error:  # noqa: BLE001 - any failure is the asker's one-line error, not our end
            answer = {"error": f"lake dev could not answer: {str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__}"}
        self.wfile.write(json.dumps(answer, default=str).encode())


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, storage: "LakeStorage") -> None:
        super().__init__(str(path), _Handler)
        self.storage = storage
        self.latest = _LatestEntries(storage)

    def answer(self, request: dict[str, Any]) -> dict:
        from lake_assets.core.raw_status import file_statuses

        if request.get("ask") != "status":
            return {"error": f"lake dev answers `status`, not {request.get('ask')!r}"}
        if {k: request.get(k) for k in ("bucket", "tables_dir")} != lake_identity(self.storage.bucket):
            return {}  # another lake: the command answers itself
        return {"files": [s.as_dict() for s in file_statuses(self.storage, self.latest.get())]}


@contextlib.contextmanager
def serving_status(home: Path, storage: "LakeStorage") -> Iterator[Path]:
    """Answer `lake status` on `home`'s socket (owner-only) from `storage` while the block runs."""
    path = home / SOCKET_FILE
    path.unlink(missing_ok=True)
    previous = os.umask(0o077)
    try:
        server = _Server(path, storage)
    finally:
        os.umask(previous)
    thread = threading.Thread(target=server.serve_forever, name="lake-dev-status", daemon=True)
    thread.start()
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()
        path.unlink(missing_ok=True)
