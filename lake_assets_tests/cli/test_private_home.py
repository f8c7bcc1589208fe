"""LAKE_HOME is owner-only: a new lake is made so, and an old world-readable one is tightened.

Runs the real `lake` command in a process whose umask lets group and others read (022, the
usual default), so only the lake's own umask and chmods can make the files private.
"""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from lake_assets.resources.ports import free_port

from lake_assets_tests.helpers.permissions import open_to_others

pytestmark = pytest.mark.integration  # each test runs the installed `lake` command

LAKE = str(Path(sys.executable).with_name("lake"))


def lake_status(home: Path) -> None:
    env = {**os.environ, "LAKE_HOME": str(home), "LAKE_S3_PORT": str(free_port())}
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "LAKE_S3_ENDPOINT", "DAGSTER_HOME"):
        env.pop(name, None)
    # the umask set by a shell, not by a preexec_fn: Python code run between fork and exec
    # in this process (which holds gRPC threads, the engine's client) once aborted the child
    # in gRPC's fork handler ("epoll_wait error: Bad file descriptor")
    done = subprocess.run(["sh", "-c", 'umask 022 && exec "$0" status', LAKE], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_new_lake_home_is_owner_only(tmp_path: Path) -> None:
    home = tmp_path / "new" / "lake"
    lake_status(home)
    assert (home / "dagster" / "dagster.yaml").exists() and (home / "s3").is_dir()
    assert open_to_others(home) == []


def test_an_old_world_readable_lake_home_is_tightened(tmp_path: Path) -> None:
    home = tmp_path / "old"
    (home / "dagster" / "history").mkdir(parents=True)
    (home / "dagster" / "history" / "runs.db").write_bytes(b"")
    (home / "s3-server.log").write_text("old log\n")
    (home / "notes.txt").write_text("not the lake's\n")
    for path in (home, home / "dagster", home / "dagster" / "history"):
        path.chmod(0o755)
    for path in (home / "dagster" / "history" / "runs.db", home / "s3-server.log", home / "notes.txt"):
        path.chmod(0o644)
    lake_status(home)
    assert open_to_others(home) == ["old/notes.txt 0o644"]  # the lake tightens what is its own only
    assert stat.S_IMODE((home / "dagster" / "history" / "runs.db").stat().st_mode) == 0o600

