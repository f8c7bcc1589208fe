"""The embedded S3 server's supervisor, and the locks and leases its users share.

One small process per server (standard library and one small lake module only, so it
starts in tens of ms) is the parent of `weed mini` and stops it when nobody uses it any more:

- Every user (a `lake` command, a Dagster run, `lake dev`) holds a *lease* while it uses
  the server: a file under `LAKE_HOME/s3-leases/` on which it holds an exclusive `flock`.
  The kernel drops the lock when the holder exits for any reason, SIGKILL included, so a
  lease is live exactly while its holder is: no PID bookkeeping, no PID reuse.
- Starting, attaching, and stopping are serialised by `flock` on `LAKE_HOME/s3-server.lock`;
  leases are taken and judged only under it, so a server is never stopped between a user
  finding it and taking its lease, and two commands never start two servers.
- The supervisor checks the leases every `POLL_SECONDS`; with none live it stops weed.
  The last user stops it at once the same way (SIGTERM to this supervisor), without waiting
  for weed's shutdown (a second): it first moves the state file aside (`STOPPING_FILE`), so
  nobody attaches to the stopping server, and the next start waits for this supervisor to
  end. This loop is what still stops it after a user was SIGKILLed.
- weed runs with `PR_SET_PDEATHSIG=SIGTERM`, so even a SIGKILLed supervisor takes weed
  with it, and with umask 077 so every file and unix socket it makes is owner-only; the few
  files weed chmods 0644 itself (volume `.vif` files) the supervisor tightens on each poll.
- On the way out the supervisor removes the unix sockets weed leaves in /tmp, its run
  directory, and the state file if it still names this supervisor.

Run as `python -m lake_assets.resources.s3_supervisor HOME STATE_JSON -- weed mini ...`.
"""

import contextlib
import ctypes
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from lake_assets.core.private_home import tighten
from lake_assets.core.processes import command_line, pid_alive

LOCK_FILE = "s3-server.lock"
LEASE_DIR = "s3-leases"
STATE_FILE = "s3-server.json"
#: The state of a server its last user asked to stop, until its supervisor has stopped it.
STOPPING_FILE = "s3-server.stopping.json"
LOG_FILE = "s3-server.log"
POLL_SECONDS = 0.5
STOP_TIMEOUT_SECONDS = 15.0
#: How long weed may take to shut down after SIGTERM before it is killed. A clean stop takes
#: 1.1-1.7 s (its log: "Filer stopped", "Volume stopped"), but its volume server sometimes never
#: stops (2 of 15 stops after 2M-row runs, measured): the next command then waited out the whole
#: STOP_TIMEOUT_SECONDS. Killing it loses nothing: its last user has gone, and every write it
#: acknowledged is already in its files (a killed process's writes stay in the page cache).
WEED_STOP_GRACE_SECONDS = 5.0
_PR_SET_PDEATHSIG = 1


# --- the server lock -------------------------------------------------------------------

def acquire_server_lock(home: Path, blocking: bool = True) -> int | None:
    """The exclusive lock serialising start, attach and stop, as an open descriptor (closing
    it releases the lock); None if `blocking` is False and someone else holds it."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(home / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def server_lock(home: Path) -> Iterator[None]:
    """Hold the server lock for the block."""
    fd = acquire_server_lock(home)
    try:
        yield
    finally:
        os.close(fd)


# --- leases ----------------------------------------------------------------------------

class Lease:
    """A user's claim on the server: a lease file it holds locked until `release()`."""

    def __init__(self, home: Path) -> None:
        leases = home / LEASE_DIR
        leases.mkdir(mode=0o700, exist_ok=True)
        self.path = leases / f"{os.getpid()}-{time.monotonic_ns()}.lease"
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        os.write(self._fd, f"{os.getpid()}\n".encode())

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None


def live_leases(home: Path) -> list[Path]:
    """Lease files whose holder is alive; stale ones are removed. Call under `server_lock`."""
    live = []
    leases = home / LEASE_DIR
    for path in sorted(leases.glob("*.lease")) if leases.is_dir() else []:
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            live.append(path)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # its holder died without releasing
        finally:
            os.close(fd)
    return live


# --- processes -------------------------------------------------------------------------

def supervisors_of(home: Path) -> list[int]:
    """The live supervisors started for `home` (found by their module and working directory).

    Under the server lock, one that no state file names is an orphan: its starter died
    (killed) before recording it, and its weed still holds the data directory and ports.
    """
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or "lake_assets.resources.s3_supervisor" not in command_line(int(proc.name)):
            continue
        with contextlib.suppress(OSError):
            if os.path.samefile(proc / "cwd", home) and pid_alive(int(proc.name)):
                found.append(int(proc.name))
    return found


def terminate(pid: int, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
    """Stop `pid`: SIGTERM, then SIGKILL after `timeout` seconds."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return
            time.sleep(0.05)


def remove_leftovers(state: dict) -> None:
    """Remove the sockets and run directory a stopped server leaves behind."""
    for socket_path in state.get("sockets", []):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)
    if state.get("run_dir"):
        shutil.rmtree(state["run_dir"], ignore_errors=True)


# --- the supervisor process ------------------------------------------------------------

class _Stop(Exception):
    """Raised by the signal handler to leave the watch loop."""


def _die_with_parent() -> None:
    """In weed, before exec: SIGTERM when the supervisor dies; owner-only files and sockets."""
    os.umask(0o077)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def supervise(home: Path, state: dict, weed_args: list[str]) -> int:
    def stop(signum, frame):  # signal handler signature
        raise _Stop

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log = os.fdopen(os.open(home / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")
    weed = subprocess.Popen(weed_args, cwd=state["run_dir"], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    log.close()
    print(weed.pid, flush=True)  # the starter reads weed's PID from our stdout
    sys.stdout.close()
    held = None  # the server lock, kept while stopping so nobody attaches meanwhile
    try:
        while weed.poll() is None:
            time.sleep(POLL_SECONDS)
            tighten(Path(state["data_dir"]))
            fd = acquire_server_lock(home, blocking=False)
            if fd is None:
                continue  # someone is starting, attaching or stopping: look again later
            if not live_leases(home):
                held = fd
                break
            os.close(fd)
    except _Stop:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        terminate(weed.pid, WEED_STOP_GRACE_SECONDS)
        tighten(Path(state["data_dir"]))
        remove_leftovers(state)
        for name in (STATE_FILE, STOPPING_FILE):
            with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
                if json.loads((home / name).read_text())["supervisor_pid"] == os.getpid():
                    (home / name).unlink()
        if held is not None:
            os.close(held)
    return 0


def main(argv: list[str]) -> int:
    separator = argv.index("--")
    home, state = Path(argv[0]), json.loads(argv[1])
    return supervise(home, state, argv[separator + 1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
