"""TPC-DS fixtures: one bucket with SF 0.01 generated into its raw zone, shared by the module's tests."""

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from lake_assets.resources.embedded_s3 import EmbeddedS3
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.generate import GenerateResult, generate
from lake_assets_tests.conftest import make_storage

SCALE = 0.01


@pytest.fixture(scope="module")
def raw_star(s3_server: EmbeddedS3, lake_home: Path) -> Iterator[tuple[LakeStorage, GenerateResult]]:
    """A bucket holding TPC-DS SF 0.01 in the raw zone, and what the generator reported."""
    storage = make_storage(s3_server.endpoint, lake_home, f"tpcds-{uuid.uuid4().hex[:12]}")
    result = generate(storage, SCALE)
    yield storage, result
    storage.delete_prefix("")
    storage.get_client().delete_bucket(Bucket=storage.bucket)
