"""The leader of `lake dev`'s process group: runs its Dagster services and stops the whole group.

`lake dev` cannot stop its Dagster processes once it is SIGKILLed, and stopped one by one
(as `dagster dev` stops its webserver and daemon) they take up to 60 s each (the daemon joins each
of its threads for up to 30 s), which measured over 60 s on a loaded machine. This leader
gets SIGTERM from the kernel when `lake dev` dies (`PR_SET_PDEATHSIG`, set before exec),
and on SIGTERM or SIGINT it signals every member of its group at once, then SIGKILLs what
is left after a grace period.
Run as `python -m lake_assets.core.process_group [--grace SECONDS] COMMAND...`.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

from lake_assets.core.processes import group_members

#: How long the group gets to stop cleanly before SIGKILL, unless --grace says otherwise.
GRACE_SECONDS = 20.0


def main(command: list[str], grace: float = GRACE_SECONDS) -> int:
    """Run `command` in this process group until it exits or this leader is told to stop.

    The signal handler only appends to a list: no lock. It runs in the main thread between
    two bytecodes, and a `threading.Event` set there deadlocks when the main thread holds
    the Event's lock at that moment (inside its own `wait`: CPython issue 126434); a leader
    stuck so would leave the whole tree running after `lake dev` was killed."""
    stopping: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: stopping.append(signum))
    child = subprocess.Popen(command)
    while child.poll() is None and not stopping:
        time.sleep(0.5)  # the sleep goes on after a handler ran: a stop is seen within 0.5 s
    _stop_group(child, grace)
    return child.returncode if child.returncode is not None else 0


def _stop_group(child: subprocess.Popen, grace: float) -> None:
    """SIGTERM every other member of this group, SIGKILL those left after the grace period."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group signal reaches this leader too
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    group = os.getpgrp()
    os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and group_members(group):
        if child.poll() is None:
            try:
                child.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
        else:
            time.sleep(0.5)
    for pid in group_members(group):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    child.poll()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m lake_assets.core.process_group")
    parser.add_argument("--grace", type=float, default=GRACE_SECONDS, help="seconds before SIGKILL")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    arguments = parser.parse_args()
    sys.exit(main(arguments.command, arguments.grace))
