"""Shared fixtures: one real embedded S3 server (SeaweedFS) and one Sail engine per session.

Each test gets its own bucket on that server, so tests never see each other's tables.
"""

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lake_assets.resources.catalog import LakeCatalog, lake_catalog
from lake_assets.resources.embedded_s3 import EmbeddedS3, free_port, start_server, stop_server
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import EMBEDDED_ACCESS_KEY_ID, EMBEDDED_SECRET_ACCESS_KEY

from lake_assets_tests.helpers.iceberg import drop_namespace_tables

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data"


@pytest.fixture(scope="session")
def lake_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lake-home")


@pytest.fixture(scope="session")
def s3_server(lake_home: Path) -> Iterator[EmbeddedS3]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "LAKE_S3_ENDPOINT"):
        os.environ.pop(name, None)
    server = start_server(lake_home, free_port(), EMBEDDED_ACCESS_KEY_ID, EMBEDDED_SECRET_ACCESS_KEY)
    yield server
    stop_server(lake_home, server)


def make_storage(endpoint: str, lake_home: Path, bucket: str) -> LakeStorage:
    """A storage bound to a running S3 endpoint, using the embedded server's credentials."""
    storage = LakeStorage(bucket=bucket, home=str(lake_home)).with_endpoint(endpoint)
    storage.ensure_bucket()
    return storage


@pytest.fixture
def storage(s3_server: EmbeddedS3, lake_home: Path) -> Iterator[LakeStorage]:
    storage = make_storage(s3_server.endpoint, lake_home, f"t-{uuid.uuid4().hex[:12]}")
    yield storage
    storage.delete_prefix("")  # frees the server's volumes for the next tests
    storage.get_client().delete_bucket(Bucket=storage.bucket)


@pytest.fixture
def spark(storage: LakeStorage) -> SparkSession:
    return SparkEngine().session(storage)


@pytest.fixture
def catalog(storage: LakeStorage) -> Iterator[LakeCatalog]:
    """The session server's Iceberg REST catalog, with no `tpcds` tables left by earlier tests."""
    lake = lake_catalog(storage)
    drop_namespace_tables(lake, "tpcds")
    yield lake
