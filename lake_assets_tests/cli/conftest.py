"""Fixtures for the CLI tests."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lake_assets.core import registry
from lake_assets.resources.storage import LakeStorage


@pytest.fixture
def lake_env(storage: LakeStorage, monkeypatch: pytest.MonkeyPatch) -> LakeStorage:
    """Commands see the test's bucket on the running embedded server (found via LAKE_HOME)."""
    monkeypatch.setenv("LAKE_HOME", storage.home)
    monkeypatch.setenv("LAKE_S3_BUCKET", storage.bucket)
    monkeypatch.delenv("LAKE_S3_ENDPOINT", raising=False)
    monkeypatch.setenv("DAGSTER_HOME", os.environ.get("DAGSTER_HOME", ""))
    return storage


@pytest.fixture
def tables_dir(lake_env: LakeStorage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A team's own declarations directory (LAKE_TABLES_DIR) for the test's commands."""
    folder = tmp_path / "tables"
    monkeypatch.setenv(registry.TABLES_DIR_VARIABLE, str(folder))
    registry.declarations.cache_clear()
    yield folder
    registry.declarations.cache_clear()
