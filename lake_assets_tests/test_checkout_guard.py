"""The suite writes nothing into the checkout: the guard plugin fails a session that does.

Each case runs a real pytest session, with the plugin, over a small test file in a scratch git
work tree, and reads its exit code and output.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.integration

INNER_TESTS = '''
from pathlib import Path

HERE = Path(__file__).parent


def test_writes_into_tmp_path(tmp_path):
    (tmp_path / "artefact.png").write_bytes(b"fine")


def test_rewrites_a_tracked_file():
    if (HERE / "REWRITE").exists():
        (HERE / "tracked.png").write_bytes(b"rewritten")


def test_adds_a_file():
    if (HERE / "ADD").exists():
        (HERE / "screenshots").mkdir(exist_ok=True)
        (HERE / "screenshots" / "new.png").write_bytes(b"new")


def test_edits_a_file_already_modified():
    if (HERE / "EDIT").exists():
        (HERE / "draft.md").write_text("edited by a test")
'''


def _work_tree(tmp_path: Path, *flags: str) -> Path:
    """A git work tree holding the inner tests, a tracked file, a developer's uncommitted edit and
    the flags (ignored files) that tell the inner tests what to do."""
    tree = tmp_path / "checkout"
    tree.mkdir()
    (tree / ".gitignore").write_text("__pycache__/\n.pytest_cache/\nREWRITE\nADD\nEDIT\n")
    (tree / "test_inner.py").write_text(INNER_TESTS)
    (tree / "tracked.png").write_bytes(b"original")
    (tree / "draft.md").write_text("committed")
    for command in (["init", "-q"], ["add", "-A"],
                    ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "inner"]):
        subprocess.run(["git", *command], cwd=tree, check=True, capture_output=True)
    (tree / "draft.md").write_text("a developer's edit in progress")
    for flag in flags:
        (tree / flag).touch()
    return tree


def _session(tree: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "lake_assets_tests.checkout_guard",
                           "-p", "no:cacheprovider", "-q", "test_inner.py"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=120)


def test_a_session_writing_only_into_tmp_path_passes(tmp_path: Path) -> None:
    result = _session(_work_tree(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "changed the checkout" not in result.stdout


@pytest.mark.parametrize(("flag", "path"), [("REWRITE", "tracked.png"), ("ADD", "screenshots/new.png"),
                                            ("EDIT", "draft.md")])
def test_a_session_writing_into_the_checkout_fails_naming_the_path(tmp_path: Path, flag: str, path: str) -> None:
    result = _session(_work_tree(tmp_path, flag))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "4 passed" in result.stdout  # every test passed: the guard alone fails the session
    assert f"the test session changed the checkout (tests write into tmp_path, never into the work tree): {path}" \
        in result.stdout, result.stdout
