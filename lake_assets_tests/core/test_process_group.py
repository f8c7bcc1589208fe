"""The process-group leader `lake dev` runs `dagster dev` under: every member stops, stubborn ones too."""

import os
import signal
import subprocess
import sys
import time

import pytest

from lake_assets.core.processes import group_members

pytestmark = pytest.mark.integration  # starts processes

#: A child that ignores SIGTERM, with a grandchild that does too: what a daemon stuck in a
#: thread join looks like from outside.
STUBBORN = (
    "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)']); time.sleep(300)"
)


def _start(grace: float) -> subprocess.Popen:
    leader = subprocess.Popen(
        [sys.executable, "-m", "lake_assets.core.process_group", "--grace", str(grace), sys.executable, "-c", STUBBORN],
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while len(group_members(leader.pid)) < 3:  # leader, child, grandchild
        assert time.monotonic() < deadline, "the stubborn tree did not start"
        time.sleep(0.1)
    return leader


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_leader_stops_members_that_ignore_sigterm(sig: signal.Signals) -> None:
    leader = _start(grace=1.0)
    try:
        started = time.monotonic()
        leader.send_signal(sig)
        leader.wait(timeout=15)
        assert group_members(leader.pid) == []
        assert time.monotonic() - started < 10
    finally:
        for pid in group_members(leader.pid):
            os.kill(pid, signal.SIGKILL)


def test_members_left_behind_by_an_exiting_command_are_stopped() -> None:
    """The command exits on its own but leaves a child in the group: the leader stops it."""
    orphan_maker = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
                    "'import time; time.sleep(300)'])")
    leader = subprocess.Popen(
        [sys.executable, "-m", "lake_assets.core.process_group", "--grace", "5", sys.executable, "-c", orphan_maker],
        start_new_session=True,
    )
    try:
        assert leader.wait(timeout=15) == 0
        assert group_members(leader.pid) == []
    finally:
        for pid in group_members(leader.pid):
            os.kill(pid, signal.SIGKILL)
