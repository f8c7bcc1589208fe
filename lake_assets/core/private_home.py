"""LAKE_HOME is its owner's alone: directories 0700, files 0600.

Two pieces keep it so:

- `owner_only_umask()` sets the process umask to 077 where lake processes start (the CLI,
  and through it `lake dev`'s Dagster services: daemon, webserver and code servers; run
  workers set it again), so every file and directory they create under LAKE_HOME, Dagster's
  run databases included, is private from birth.
- `tighten(top)` is for programs that chmod their own files wider than the umask allows
  (weed writes its volume info files 0644): the S3 supervisor tightens the data directory.
- `private_home(home)` creates LAKE_HOME 0700, and tightens a lake made before this rule
  (or by a process with a looser umask) once: if LAKE_HOME is open to group or others, it
  becomes 0700 and the lake's own entries in it (`dagster/`, `s3*`, `iceberg*`) 0700 for
  directories and 0600 for files. Never a directory that is plainly not the lake's alone:
  `/`, the user's home, a sticky directory such as /tmp, or one owned by someone else (a
  lake there keeps what it finds; what it creates is private all the same).
"""

import os
import stat
from pathlib import Path

OWNER_ONLY = 0o077


def owner_only_umask() -> None:
    """New files 0600 and directories 0700 in this process and the ones it starts."""
    os.umask(OWNER_ONLY)


#: What the lake keeps directly under LAKE_HOME, by name prefix (the rest is not ours to chmod).
LAKE_ENTRIES = ("dagster", "s3", "iceberg")


def private_home(home: Path) -> Path:
    """`home` created (0700), or tightened if group or others can reach it; returns it."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = home.stat()
    if info.st_mode & OWNER_ONLY and _lake_may_own(home, info):
        home.chmod(0o700)
        for entry in home.iterdir():
            if entry.name.startswith(LAKE_ENTRIES):
                tighten(entry)
    return home


def _lake_may_own(home: Path, info: os.stat_result) -> bool:
    shared = home.resolve() in (Path("/"), Path.home().resolve()) or info.st_mode & stat.S_ISVTX
    return not shared and info.st_uid == os.getuid()


def tighten(top: Path) -> None:
    """`top` and every directory under it 0700, every file 0600 (owner's execute bits kept)."""
    _chmod(top)
    if not top.is_dir() or top.is_symlink():
        return
    for root, directories, files in os.walk(top):
        for name in directories + files:
            _chmod(Path(root, name))


def _chmod(path: Path) -> None:
    """A directory 0700, a file 0600 (owner's bits kept), unless it is a symlink or a socket."""
    try:
        info = path.lstat()
    except OSError:
        return
    if stat.S_ISLNK(info.st_mode) or stat.S_ISSOCK(info.st_mode) or stat.S_IMODE(info.st_mode) & OWNER_ONLY == 0:
        return
    try:
        path.chmod(stat.S_IMODE(info.st_mode) & 0o700 | (0o700 if stat.S_ISDIR(info.st_mode) else 0o600))
    except OSError:
        pass  # gone meanwhile, or not ours: never fail a start (or the supervisor) over a mode
