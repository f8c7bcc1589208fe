"""LAKE_HOME is its owner's alone: directories 0700, files 0600.

Two pieces keep it so:

- `owner_only_umask()` sets the process umask to 077 where lake processes start (the CLI,
  and through it `lake dev`'s `dagster dev` and its daemon, webserver and code servers; run
  workers set it again), so every file and directory they create under LAKE_HOME, Dagster's
  run databases included, is private from birth.
- `tighten(top)` is for programs that chmod their own files wider than the umask allows
  (weed writes its volume info files 0644): the S3 supervisor tightens the data directory.
- `private_home(home)` creates LAKE_HOME 0700, and tightens a lake made before this rule
  (or by a process with a looser umask) once: if LAKE_HOME itself is open to group or
  others, every directory under it becomes 0700 and every file 0600.
"""

import os
import stat
from pathlib import Path

OWNER_ONLY = 0o077


def owner_only_umask() -> None:
    """New files 0600 and directories 0700 in this process and the ones it starts."""
    os.umask(OWNER_ONLY)


def private_home(home: Path) -> Path:
    """`home` created (0700) or tightened if group or others can reach it; returns it."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    if home.stat().st_mode & OWNER_ONLY:
        tighten(home)
    return home


def tighten(top: Path) -> None:
    """`top` and every directory under it 0700, every file 0600 (owner's execute bits kept)."""
    _chmod(top, 0o700)
    for root, directories, files in os.walk(top):
        for name in directories:
            _chmod(Path(root, name), 0o700)
        for name in files:
            _chmod(Path(root, name), 0o600)


def _chmod(path: Path, mode: int) -> None:
    """chmod `path` unless it is a symlink, a socket, or gone (a server may be removing it)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode) or stat.S_ISSOCK(info.st_mode) or stat.S_IMODE(info.st_mode) & OWNER_ONLY == 0:
        return
    try:
        path.chmod(stat.S_IMODE(info.st_mode) & 0o700 | (0o700 if stat.S_ISDIR(info.st_mode) else 0o600))
    except FileNotFoundError:
        pass
