"""One writer per table: a lease object in the bucket, taken and kept with conditional puts.

Every path that writes a table (a Dagster run launched by the daemon, `lake run` in-process,
maintenance, `lake approve`) wraps its whole write in `table_lock(storage, table)`:

- acquire: `PUT _lake/locks/<table>.json` with `If-None-Match: *` -- exactly one of two
  writers racing for a free table gets it (S3 answers 412 to the other);
- keep: a heartbeat thread renews the lease every `ttl / 3` with `If-Match: <ETag>`, so
  a renewal can never overwrite a lease somebody else has taken over;
- take over: a lease whose holder stopped renewing past its expiry, or whose holder
  process is gone (same host), is replaced with `If-Match: <its ETag>` -- of several
  waiters only one wins;
- release: `DELETE` with `If-Match: <ETag>`, so a late release never removes a newer lease.

A waiter polls until `wait_seconds` pass, then raises `TableLocked` naming the holder.
Expiry uses wall-clock time (`time.time()`); hosts sharing a lake need roughly synced clocks
(the TTL is a minute, far above ordinary NTP skew).

The lease also tells the body of work whether it still holds the table: if a renewal
finds the lease taken over (this process was frozen past the TTL), `Lease.lost` is set and
`Lease.check()` raises `LockLost`, so a writer can stop before committing.

What protects a writer that ignores the lease (measured here, Sail 0.7.2 over SeaweedFS,
two Sail servers committing to one table at the same instant; source: sail-delta-lake's
`transaction/mod.rs`): Sail writes the next log entry `_delta_log/<N>.json` with a
conditional put (object_store `PutMode::Create`, i.e. `If-None-Match: *`), so a loser can
never overwrite a committed version. What the loser does next depends on the operation:
- MERGE (measured: in 6 of 8 simultaneous pairs one MERGE lost and failed with "Failed to
  commit transaction: 0"; the winner's rows stayed) -- and by the code UPDATE, DELETE and
  overwrite of an existing table: no retry, the table keeps the winner's version. Our run
  then fails before writing the ledger, its files stay pending and the rerun converges.
- blind append: re-checked against the winner's commit (conflict checker) and retried
  as version N+1 -- both appends land.
- creating a table that another writer created first: the creation is stripped and the
  commit retried as an append to the winner's table. Two writers creating `insurance` at
  once (the first run on a new lake) therefore both "succeed" -- this is how two
  concurrent `lake run`s ended with 111 rows for 90 keys, and why every lake writer
  takes this lease before it even reads what is pending.
delta-rs (quarantine, ledger, maintenance) commits the same way (`conditional_put=etag`).
JVM Delta's default S3 log store is *not* safe across processes (it assumes one driver):
a JVM engine writing to a lake shared with other writers needs a DynamoDB log store or
this lease.
"""

import contextlib
import datetime as dt
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from botocore.exceptions import BotoCoreError, ClientError

from lake_assets.core.errors import LakeError
from lake_assets.core.processes import pid_alive
from lake_assets.resources.storage import LakeStorage

LOCK_PREFIX = "_lake/locks/"
DEFAULT_TTL_SECONDS = 60.0
DEFAULT_WAIT_SECONDS = 900.0
POLL_SECONDS = 0.5
#: S3 answers 412 to a failed precondition; MinIO and AWS answer 409 while a concurrent
#: conditional write of the same key is in flight.
_CONTENDED = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}

log = logging.getLogger(__name__)


class TableLocked(LakeError):
    """Another writer held the table for longer than we were willing to wait."""


class LockLost(LakeError):
    """Our lease was taken over while we held it (we stopped renewing past its expiry)."""


@dataclass(frozen=True)
class LockOwner:
    """Who holds a lease: the Dagster run (or command), its process and host."""

    run_id: str
    pid: int
    host: str

    @classmethod
    def current(cls, run_id: str) -> "LockOwner":
        return cls(run_id=run_id, pid=os.getpid(), host=socket.gethostname())

    def describe(self) -> str:
        return f"run {self.run_id} (pid {self.pid} on {self.host})"

    def is_dead_here(self) -> bool:
        """True only if the holder ran on this host and its process no longer exists."""
        if self.host != socket.gethostname():
            return False
        return not pid_alive(self.pid)


@dataclass(frozen=True)
class LeaseRecord:
    """The JSON body of a lease object."""

    table: str
    owner: LockOwner
    token: str  # unique per acquisition, so two bodies never share an ETag
    acquired_at: float
    renewed_at: float
    expires_at: float

    def to_json(self) -> bytes:
        body = asdict(self)
        body["acquired_at_utc"] = _utc(self.acquired_at)
        body["expires_at_utc"] = _utc(self.expires_at)
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "LeaseRecord | None":
        try:
            body = json.loads(data)
            return cls(table=body["table"], owner=LockOwner(**body["owner"]), token=body["token"],
                       acquired_at=float(body["acquired_at"]), renewed_at=float(body["renewed_at"]),
                       expires_at=float(body["expires_at"]))
        except (ValueError, KeyError, TypeError):
            return None  # unreadable: treated as expired

    def expired(self, now: float) -> bool:
        return now >= self.expires_at

    def describe(self) -> str:
        return (f"{self.owner.describe()}, holding it since {_utc(self.acquired_at)}, "
                f"lease expires {_utc(self.expires_at)}")


class Lease:
    """A held lease; renewed in the background until released."""

    def __init__(self, storage: LakeStorage, client, key: str, record: LeaseRecord, etag: str,
                 ttl: float) -> None:
        self.storage, self.key, self.record, self.etag, self.ttl = storage, key, record, etag, ttl
        self._client = client  # boto3 clients are thread-safe once built; building one is not
        self.lost = False
        self.renewals = 0
        self._stop = threading.Event()
        self._guard = threading.Lock()
        self._thread = threading.Thread(target=self._heartbeat, name=f"lease-{record.table}", daemon=True)

    @property
    def table(self) -> str:
        return self.record.table

    def check(self) -> None:
        """Raise `LockLost` if another writer has taken the table over."""
        if self.lost:
            raise LockLost(f"lost the write lock on table {self.table!r}: it expired and was taken over")

    def renew(self) -> None:
        now = time.time()
        record = LeaseRecord(self.record.table, self.record.owner, self.record.token,
                             self.record.acquired_at, now, now + self.ttl)
        with self._guard:
            if self.lost:
                return
            etag = _put(self.storage, self._client, self.key, record.to_json(), IfMatch=self.etag)
            if etag is None:
                self.lost = True
                log.error("lease on %s was taken over by another writer", self.table)
                return
            self.record, self.etag = record, etag
            self.renewals += 1

    def release(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        with self._guard:
            if self.lost:
                return
            try:
                self._client.delete_object(Bucket=self.storage.bucket, Key=self.key,
                                                        IfMatch=_quoted(self.etag))
            except ClientError as error:
                if _code(error) not in _CONTENDED | {"NoSuchKey", "404"}:
                    raise self.storage.unavailable(error) from error
                self.lost = True
            except BotoCoreError as error:
                raise self.storage.unavailable(error) from error

    def _start(self) -> None:
        self._thread.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self.renew()
            except LakeError as error:  # S3 briefly unreachable: retry on the next beat
                log.warning("could not renew the lease on %s: %s", self.table, error)
            if self.lost:
                return


def lock_key(table: str) -> str:
    return f"{LOCK_PREFIX}{table}.json"


def read_lease(storage: LakeStorage, table: str, client=None) -> tuple[LeaseRecord | None, str] | None:
    """The lease on `table` and its ETag, or None when the table is free."""
    try:
        response = (client or storage.get_client()).get_object(Bucket=storage.bucket, Key=lock_key(table))
    except ClientError as error:
        if _code(error) in ("NoSuchKey", "404"):
            return None
        raise storage.unavailable(error) from error
    except BotoCoreError as error:
        raise storage.unavailable(error) from error
    return LeaseRecord.from_json(response["Body"].read()), response["ETag"].strip('"')


def acquire(storage: LakeStorage, table: str, owner: LockOwner, ttl: float = DEFAULT_TTL_SECONDS,
            wait_seconds: float = DEFAULT_WAIT_SECONDS) -> Lease:
    """Take the write lease on `table`, waiting up to `wait_seconds` for its holder."""
    key = lock_key(table)
    client = storage.get_client()
    deadline = time.monotonic() + wait_seconds
    token = uuid.uuid4().hex
    while True:
        now = time.time()
        record = LeaseRecord(table, owner, token, now, now, now + ttl)
        etag = _put(storage, client, key, record.to_json(), IfNoneMatch="*")
        holder = None
        if etag is None:
            current = read_lease(storage, table, client)
            if current is None:
                continue  # released between our put and our read: try again at once
            holder, holder_etag = current
            if holder is not None and holder.token == token:
                etag, record = holder_etag, holder  # our put landed; only its answer was lost
            elif holder is None or holder.expired(time.time()) or holder.owner.is_dead_here():
                etag = _put(storage, client, key, record.to_json(), IfMatch=holder_etag)
                if etag is not None:
                    log.warning("took over the lease on %s from %s", table,
                                holder.describe() if holder else "an unreadable lease")
        if etag is not None:
            lease = Lease(storage, client, key, record, etag, ttl)
            lease._start()
            return lease
        if time.monotonic() >= deadline:
            who = holder.describe() if holder else "another writer"
            raise TableLocked(f"table {table!r} is being written by {who}; gave up after waiting "
                              f"{wait_seconds:.0f} s (it is released when that run ends, or "
                              f"{ttl:.0f} s after its process dies)")
        time.sleep(POLL_SECONDS)


@contextlib.contextmanager
def table_lock(storage: LakeStorage, table: str, owner: LockOwner | None = None,
               ttl: float = DEFAULT_TTL_SECONDS, wait_seconds: float = DEFAULT_WAIT_SECONDS) -> Iterator[Lease]:
    """Hold the write lease on `table` for the block (see the module docstring)."""
    lease = acquire(storage, table, owner or LockOwner.current(f"pid-{os.getpid()}"), ttl, wait_seconds)
    try:
        yield lease
    except BaseException:
        with contextlib.suppress(LakeError):  # never mask the block's own failure
            lease.release()
        raise
    lease.release()


def _put(storage: LakeStorage, client, key: str, body: bytes, **condition: str) -> str | None:
    """A conditional put; the new ETag, or None when the condition failed."""
    if "IfMatch" in condition:
        condition["IfMatch"] = _quoted(condition["IfMatch"])
    try:
        response = client.put_object(Bucket=storage.bucket, Key=key, Body=body,
                                                   ContentType="application/json", **condition)
    except ClientError as error:
        if _code(error) in _CONTENDED:
            return None
        raise storage.unavailable(error) from error
    except BotoCoreError as error:
        raise storage.unavailable(error) from error
    return response["ETag"].strip('"')


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _quoted(etag: str) -> str:
    return f'"{etag.strip(chr(34))}"'


def _utc(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat(timespec="seconds")
