"""Processes on this machine as /proc shows them: alive, their command line, their group."""

import contextlib
import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone); reaps it if it is our child."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def group_members(group: int) -> list[int]:
    """Live processes of process group `group` other than this one (from /proc)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == group and state != "Z":
            members.append(int(entry))
    return members
