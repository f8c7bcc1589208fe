"""What under a LAKE_HOME others could read: the check behind every owner-only test."""

import stat
from pathlib import Path


def open_to_others(home: Path) -> list[str]:
    """Everything under `home` (itself included) that group or others may read, write or enter."""
    found = []
    for path in (home, *home.rglob("*")):
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            continue  # removed while we looked (a server stopping)
        if not stat.S_ISLNK(mode) and mode & 0o077:
            found.append(f"{path.relative_to(home.parent)} {oct(stat.S_IMODE(mode))}")
    return found
