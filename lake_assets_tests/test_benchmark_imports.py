"""Every name a benchmark imports from the lake exists (benchmarks import inside functions, so
importing their modules does not catch a renamed or removed name: a benchmark broke so once)."""

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


def _lake_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every `from lake_assets... import name` in the file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lake_assets"):
            found += [(node.module, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_a_benchmarks_lake_imports_exist(path: Path) -> None:
    missing = []
    for module, name in _lake_imports(path):
        imported = importlib.import_module(module)
        if not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ModuleNotFoundError:
                missing.append(f"{module}.{name}")
    assert not missing, f"{path.name} imports what the lake no longer has: {missing}"
