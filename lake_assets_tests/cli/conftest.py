"""Fixtures for the CLI tests."""

import os

import pytest

from lake_assets.resources.storage import LakeStorage


@pytest.fixture
def lake_env(storage: LakeStorage, monkeypatch: pytest.MonkeyPatch) -> LakeStorage:
    """Commands see the test's bucket on the running embedded server (found via LAKE_HOME)."""
    monkeypatch.setenv("LAKE_HOME", storage.home)
    monkeypatch.setenv("LAKE_S3_BUCKET", storage.bucket)
    monkeypatch.delenv("LAKE_S3_ENDPOINT", raising=False)
    monkeypatch.setenv("DAGSTER_HOME", os.environ.get("DAGSTER_HOME", ""))
    return storage
