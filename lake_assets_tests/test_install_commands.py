"""The README's two commands, checked offline against pyproject.toml, uv.lock and .ci/run.

The first command must work on a system Python that refuses `pip install` outside a virtualenv
(PEP 668: Debian, Ubuntu) and install only what `lake` runs on; the second installs the test
tools and runs the suite, and CI runs exactly that command. (The first command was run by hand
from a fresh clone on Debian 12's own Python; the README gives what it took.)
"""

import re
import shlex
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Packages only the tests, the linters or the benchmarks use.
TEST_AND_BENCH_TOOLS = {"pytest", "hypothesis", "playwright", "mypy", "ruff", "kubernetes-validate",
                        "jsonschema", "matplotlib", "delta-spark"}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Two commands", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]
    assert len(lines) == 2, lines
    return lines


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _steps(command: str) -> list[list[str]]:
    return [shlex.split(step) for step in command.split("&&")]


def test_first_command_installs_uv_into_a_virtualenv_then_runs_the_demo(commands: list[str]) -> None:
    steps = _steps(commands[0])
    venv = steps[0]
    assert venv[:3] == ["python3", "-m", "venv"]
    tools = venv[3]
    pip = steps[1]
    # pip of that virtualenv, never the system's (PEP 668 refuses it) nor `--user`/`--break-system-packages`
    assert pip[0] == f"{tools}/bin/pip" and pip[1] == "install"
    assert not {"--user", "--break-system-packages"} & set(pip)
    assert re.fullmatch(r"uv==\d+\.\d+\.\d+", pip[-1]), "uv is pinned"
    sync, run = steps[2], steps[3]
    assert sync == [f"{tools}/bin/uv", "sync", "--frozen"]  # the default groups only: see the next test
    assert run[:3] == [f"{tools}/bin/uv", "run", "--frozen"] and run[3:] == ["lake", "demo"]


def test_the_default_install_is_what_lake_runs_on(pyproject: dict) -> None:
    """`uv sync --frozen` installs the project's locked dependencies and no group."""
    assert pyproject["tool"]["uv"]["default-groups"] == []
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    packages = {_normalize(p["name"]): p for p in lock["package"]}
    (lake,) = [p for p in lock["package"] if p["name"] == "lake"]
    assert lake.get("default-groups", []) == []

    installed: set[str] = set()
    pending: list[tuple[str, tuple[str, ...]]] = [(_normalize(d["name"]), tuple(d.get("extra", [])))
                                                  for d in lake["dependencies"]]
    while pending:
        name, extras = pending.pop()
        package = packages[name]
        edges = list(package.get("dependencies", []))
        for extra in extras:
            edges += package.get("optional-dependencies", {}).get(extra, [])
        if name in installed and not extras:
            continue
        installed.add(name)
        pending += [(_normalize(d["name"]), tuple(d.get("extra", []))) for d in edges
                    if _normalize(d["name"]) not in installed or d.get("extra")]
    assert {"dagster", "pysail", "pyspark", "deltalake", "pyiceberg", "duckdb"} <= installed
    assert installed & TEST_AND_BENCH_TOOLS == set()
    # ...and the test command's group has them
    groups = pyproject["dependency-groups"]
    dev = {_normalize(re.split(r"[<>=\[ ;]", r, maxsplit=1)[0]) for r in groups["dev"] if isinstance(r, str)}
    included = [r["include-group"] for r in groups["dev"] if isinstance(r, dict)]
    assert {"pytest", "playwright", "mypy", "ruff"} <= dev
    assert included == ["docs"] and "mkdocs==1.6.1" in groups["docs"]  # the suite builds the docs site


def test_second_command_installs_the_test_tools_and_ci_runs_it(commands: list[str]) -> None:
    tools = _steps(commands[0])[0][3]
    test = shlex.split(commands[1])
    assert test[:3] == [f"{tools}/bin/uv", "run", "--frozen"] and test[-1] == "pytest"
    assert {"--group", "dev"} <= set(test) and test[test.index("--group") + 1] == "dev"
    ci = (ROOT / ".ci" / "run").read_text()
    ci_lines = [line.strip() for line in ci.splitlines() if not line.lstrip().startswith("#")]
    assert commands[1] in ci_lines
    # CI bootstraps uv the README's way (same virtualenv, same uv release)
    bootstrap = " && ".join(commands[0].split(" && ")[:2])
    assert bootstrap in ci
