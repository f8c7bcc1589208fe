"""The docs: the README's links resolve, and the MkDocs site builds strictly from the code.

`.ci/run` builds the site with `mkdocs build --strict`; these tests keep that build honest:
the generated references hold every command and setting of the code, and a broken link, a
broken anchor or a missing README section fails the build instead of being skipped.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parents[1]


def _links(markdown: str) -> list[str]:
    """Every link and image target of a Markdown text, as a CommonMark parser reads them."""
    targets = []
    for token in MarkdownIt().parse(markdown):
        for child in token.children or ():
            target = child.attrGet("href") or child.attrGet("src")
            if target:
                targets.append(str(target))
    return targets


def test_every_relative_link_of_the_readme_names_a_file_of_the_checkout() -> None:
    targets = [target for target in _links((REPO / "README.md").read_text()) if "://" not in target]
    assert any(target.startswith("docs/") for target in targets), targets  # it points into the docs
    missing = [target for target in targets if not (REPO / target.partition("#")[0]).is_file()]
    assert not missing, missing


def _site_copy(tmp_path: Path) -> Path:
    """The files the docs build reads, copied, so a test can break one."""
    copy = tmp_path / "checkout"
    shutil.copytree(REPO / "docs", copy / "docs")
    shutil.copytree(REPO / "benchmarks" / "results", copy / "benchmarks" / "results")
    shutil.copytree(REPO / "deploy" / "aws", copy / "deploy" / "aws")  # the IAM policies operations/aws.md includes
    for name in ("mkdocs.yml", "README.md", "benchmarks/README.md"):
        shutil.copy(REPO / name, copy / name)
    return copy


def _build(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=root, capture_output=True, text=True, timeout=300)


@pytest.mark.integration
def test_the_site_builds_strictly_with_the_references_generated_from_the_code(tmp_path: Path) -> None:
    import typer.main

    from lake_assets.cli import app
    from lake_assets.settings import ENV_VARS

    result = _build(REPO, tmp_path / "site")
    assert result.returncode == 0, result.stderr
    cli = (tmp_path / "site/reference/cli/index.html").read_text()
    commands = typer.main.get_command(app).commands
    assert len(commands) > 10 and all(f"lake {name}" in cli for name in commands), sorted(commands)
    settings = (tmp_path / "site/reference/settings/index.html").read_text()
    assert [name for name in ENV_VARS if name not in settings] == []
    assert (tmp_path / "site/images/cdc_batches.png").is_file()  # from benchmarks/results/
    start = (tmp_path / "site/getting-started/index.html").read_text()
    assert "Start the lake" in start and "lake COMMAND --help" in start  # the README's sections, included


@pytest.mark.integration
@pytest.mark.parametrize(("page", "broken", "says"), [
    ("docs/concepts/scd2.md", "[a page](no-such-page.md)", "contains a link 'no-such-page.md', but the target 'concepts/no-such-page.md' is not found"),
    ("docs/security.md", "[an anchor](operations/storage.md#no-such-heading)", "does not contain an anchor '#no-such-heading'"),
    ("docs/index.md", '--8<-- "README.md:no-such-section"', "Snippet section 'no-such-section' could not be located"),
])
def test_a_broken_link_fails_the_build(tmp_path: Path, page: str, broken: str, says: str) -> None:
    copy = _site_copy(tmp_path)
    with open(copy / page, "a") as text:
        text.write(f"\n\n{broken}\n")
    result = _build(copy, tmp_path / "site")
    assert result.returncode != 0 and says in result.stderr, result.stderr
