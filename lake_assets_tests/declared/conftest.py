"""The commands' fixtures (a lake's environment, a declarations directory) for tests that drive a
declared table through `lake` and Dagster."""

from lake_assets_tests.cli.conftest import lake_env, tables_dir

__all__ = ["lake_env", "tables_dir"]
