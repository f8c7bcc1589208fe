"""A pytest plugin: a session that changes the checkout fails, naming what it changed.

Tests write into temporary folders (`tmp_path`), never into the work tree. The plugin takes
`git status` of the work tree the session runs in (its rootdir) when the session starts and
again when it ends: tracked files changed, added or deleted, and untracked files that are
not ignored, each with a digest of its content, so a change to a file that was already
modified before the session (a developer's edit in progress) is caught too. Nothing is
compared where the rootdir is not a git work tree (a source archive) or git is missing.
`lake_assets_tests/conftest.py` loads it for the suite.
"""

import hashlib
import subprocess
from pathlib import Path

import pytest

#: path -> (git's two status letters, digest of the file's bytes; "" for a path that is no file)
CheckoutState = dict[str, tuple[str, str]]

_BEFORE = pytest.StashKey[CheckoutState]()
_CHANGED = pytest.StashKey[list[str]]()


def checkout_state(root: Path) -> CheckoutState | None:
    """Every path `git status` shows for the work tree at `root`, with a digest of its content."""
    try:
        status = subprocess.run(["git", "status", "--porcelain=v1", "-z", "--untracked-files=all"], cwd=root,
                                capture_output=True, check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        return None
    state: CheckoutState = {}
    entries = iter(status.split("\0"))
    for entry in entries:
        if not entry:
            continue
        letters, path = entry[:2], entry[3:]
        if "R" in letters or "C" in letters:
            next(entries)  # a rename's or copy's source path follows it
        state[path] = (letters, _digest(root / path))
    return state


def changed_paths(before: CheckoutState, after: CheckoutState) -> list[str]:
    """The paths whose status or content differs between two states of the same work tree."""
    return sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def pytest_sessionstart(session: pytest.Session) -> None:
    state = checkout_state(session.config.rootpath)
    if state is not None:
        session.config.stash[_BEFORE] = state


def pytest_sessionfinish(session: pytest.Session) -> None:
    before = session.config.stash.get(_BEFORE, None)
    after = checkout_state(session.config.rootpath)
    if before is None or after is None:
        return
    changed = changed_paths(before, after)
    if changed:
        session.config.stash[_CHANGED] = changed
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    changed = config.stash.get(_CHANGED, [])
    if changed:
        terminalreporter.section("the checkout changed", red=True, bold=True)
        terminalreporter.write_line("the test session changed the checkout (tests write into tmp_path, never into the "
                                    "work tree): " + ", ".join(changed), red=True)
