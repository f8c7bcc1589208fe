"""DuckDB extensions from their PyPI wheels (`duckdb-extension-<name>`), loaded by file path.

There is no network at run time, so `INSTALL` cannot fetch them; each wheel ships the
binary at `duckdb_extension_<name>/extensions/v<duckdb version>/<name>.duckdb_extension`.
"""

import importlib.util
from pathlib import Path

import duckdb

from lake_assets.core.errors import EngineUnavailable


def extension_path(name: str) -> Path:
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or spec.origin is None:
        raise EngineUnavailable(f"the DuckDB extension {name!r} is not installed (duckdb-extension-{name})")
    path = Path(spec.origin).parent / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if not path.exists():
        raise EngineUnavailable(f"the DuckDB extension {name!r} has no build for DuckDB {duckdb.__version__}")
    return path


def load_extensions(con: duckdb.DuckDBPyConnection, *names: str) -> None:
    for name in names:
        con.execute(f"LOAD '{extension_path(name)}'")
