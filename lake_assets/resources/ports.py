"""TCP ports on 127.0.0.1 for the servers the lake starts: free ones, and who holds a taken one."""

import contextlib
from collections.abc import Set
import os
import socket
from pathlib import Path


def port_free(port: int) -> bool:
    """True if nothing listens on 127.0.0.1:`port` right now (a later bind can still lose a race)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int, exclude: Set[int] = frozenset()) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 right now, none in `exclude`."""
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
        port = free_ports(1)[0]
        if port + 10000 < 65536 and port_free(port + 10000):
            return port


def listening_ports(pid: int) -> list[int]:
    """TCP ports the process `pid` listens on (from /proc: its socket inodes in the TCP tables)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    return sorted({port for port, inode in _listeners() if inode in inodes})


def _listeners() -> list[tuple[int, str]]:
    """(port, socket inode) of every listening TCP socket in this network namespace."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A":  # LISTEN
                    found.append((int(fields[1].rsplit(":", 1)[1], 16), fields[9]))
    return found


def port_holder(port: int) -> str:
    """Who listens on `port`, as "pid N (command)" when /proc shows it (only our own processes, as a
    rule), else "another program"."""
    inodes = {f"socket:[{inode}]" for listening, inode in _listeners() if listening == port}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        command = (proc / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
                        return f"pid {proc.name} ({Path(command).name or '?'})"
    return "another program"
