"""S3 access for every part of `lake`: boto3 clients, delta-rs storage options, engine env.

`LakeStorage` is plain configuration plus logic, free of Dagster, so core/, the domains and
the CLI use it without importing Dagster; the Dagster resource wrapping it is
`resources/storage_resource.py`. With no endpoint configured, `running()` leases the
embedded SeaweedFS server (attaching to the live one or starting it) for the duration of a
block; with one it talks to that endpoint (MinIO, AWS S3, ...). Credentials come from one
place, `settings.s3_credentials`, when a client is built.
"""

import contextlib
import functools
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict, PrivateAttr

from lake_assets.core.errors import StorageUnavailable
from lake_assets.resources.embedded_s3 import embedded_s3, running_server
from lake_assets.settings import (
    DEFAULT_BUCKET,
    DEFAULT_HOME,
    DEFAULT_REGION,
    DEFAULT_S3_PORT,
    DEFAULT_WAREHOUSE,
    LakeSettings,
    S3Credentials,
    embedded_reader_credentials,
    s3_credentials,
)


_client_lock = threading.Lock()


@functools.lru_cache(maxsize=32)
def _client_unlocked(endpoint: str, key: str, secret: str, region: str, pid: int):  # pid: part of the key
    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret, region_name=region,
        config=Config(s3={"addressing_style": "path"}, connect_timeout=3, read_timeout=60,
                      retries={"max_attempts": 2, "mode": "standard"}),
    )


def _client(endpoint: str, key: str, secret: str, region: str, pid: int):
    """One client per (endpoint, key pair, region) and process: a forked run worker never
    shares its parent's pooled connections. Made under a lock: boto3's default session is
    not thread-safe while it builds a client."""
    with _client_lock:
        return _client_unlocked(endpoint, key, secret, region, pid)


class LakeStorage(BaseModel):
    """The lake's object store: one bucket holding `raw/`, `staging/` and `curated/`."""

    model_config = ConfigDict(frozen=True)

    endpoint: str = ""
    bucket: str = DEFAULT_BUCKET
    region: str = DEFAULT_REGION
    home: str = DEFAULT_HOME
    embedded_port: int = DEFAULT_S3_PORT
    #: True: if `embedded_port` is taken, the embedded server starts on a free port instead (and says so)
    embedded_port_fallback: bool = True
    #: Iceberg REST catalog: empty means the one the embedded server serves (see resources/catalog.py).
    catalog_uri: str = ""
    warehouse: str = DEFAULT_WAREHOUSE
    _resolved_endpoint: str = PrivateAttr(default="")
    #: True: clients use the embedded server's read-only pair (see `reading_only`)
    _read_only: bool = PrivateAttr(default=False)

    @classmethod
    def from_settings(cls, settings: LakeSettings) -> "LakeStorage":
        return cls(
            endpoint=settings.s3_endpoint, bucket=settings.s3_bucket, region=settings.s3_region,
            home=str(settings.home), embedded_port=settings.s3_port,
            embedded_port_fallback=not settings.s3_port_explicit,
            catalog_uri=settings.iceberg_uri, warehouse=settings.iceberg_warehouse,
        )

    @property
    def embedded(self) -> bool:
        return not self.endpoint

    @contextlib.contextmanager
    def running(self) -> Iterator["LakeStorage"]:
        """This storage with a reachable endpoint and bucket.

        The embedded server is leased for the block: reused if one is up (e.g. `lake dev`'s),
        else started; it stops once its last user is done. Sensors use `attached()` instead,
        which never starts anything.
        """
        if not self.embedded:
            resolved = self.with_endpoint(self.endpoint)
            resolved.ensure_bucket()
            yield resolved
            return
        with embedded_s3(Path(self.home), self.embedded_port, self.credentials(),
                         fallback=self.embedded_port_fallback) as server:
            resolved = self.with_endpoint(server.endpoint)
            resolved.ensure_bucket()
            yield resolved

    def attached(self) -> "LakeStorage | None":
        """This storage if its endpoint is up already, without starting anything (for sensors)."""
        if not self.embedded:
            return self.with_endpoint(self.endpoint)
        server = running_server(Path(self.home))
        return self.with_endpoint(server.endpoint) if server else None

    def with_endpoint(self, endpoint: str) -> "LakeStorage":
        resolved = self.model_copy()
        resolved._resolved_endpoint = endpoint
        return resolved

    # --- clients and options -------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        if not self._resolved_endpoint:
            raise RuntimeError("LakeStorage used outside `running()`: no endpoint resolved")
        return self._resolved_endpoint

    def credentials(self) -> S3Credentials:
        """The lake's S3 key pair (environment, or this lake's generated pair for the embedded server).

        A `reading_only()` storage on the embedded server gets its read-only pair instead.
        """
        if self._read_only and self.embedded:
            return embedded_reader_credentials(Path(self.home))
        return s3_credentials(Path(self.home), self.embedded)

    def reading_only(self) -> "LakeStorage":
        """This storage with clients that can only read and list (the embedded server's reader identity).

        On an external S3 (`LAKE_S3_ENDPOINT`) the configured pair is all there is: give
        `lake query --engine duckdb` a read-only key there through that pair's own policy.
        """
        resolved = self.model_copy()
        resolved._read_only = True
        return resolved

    def get_client(self):  # boto3's client type is generated at run time
        """The process's S3 client for this endpoint and key pair (made once; boto3 clients are thread-safe)."""
        key, secret = self.credentials()
        return _client(self.endpoint_url, key, secret, self.region, os.getpid())

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def delta_storage_options(self) -> dict[str, str]:
        """Options for delta-rs (object_store) to read and commit to tables in this bucket."""
        key, secret = self.credentials()
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_REGION": self.region,
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
            "conditional_put": "etag",
        }

    def engine_environment(self) -> dict[str, str]:
        """Environment the embedded Sail engine reads to reach this bucket over `s3://`."""
        key, secret = self.credentials()
        return {
            "AWS_ENDPOINT": self.endpoint_url,
            "AWS_ALLOW_HTTP": "true",
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
            "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_REGION": self.region,
        }

    # --- bucket operations ---------------------------------------------------------

    def ensure_bucket(self) -> None:
        client = self.get_client()
        try:
            client.head_bucket(Bucket=self.bucket)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket"):
                raise self.unavailable(error) from error
            client.create_bucket(Bucket=self.bucket)
        except BotoCoreError as error:
            raise self.unavailable(error) from error

    def list_objects(self, prefix: str) -> list[dict]:
        """Objects under `prefix`, sorted by key; zero-byte "directory" keys are left out."""
        client = self.get_client()
        objects: list[dict] = []
        try:
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                objects.extend(o for o in page.get("Contents", []) if not o["Key"].endswith("/"))
        except (BotoCoreError, ClientError) as error:
            raise self.unavailable(error) from error
        return sorted(objects, key=lambda o: o["Key"])

    def get_bytes(self, key: str) -> tuple[bytes, str]:
        """The object's content and its ETag (without quotes)."""
        try:
            response = self.get_client().get_object(Bucket=self.bucket, Key=key)
            return response["Body"].read(), response["ETag"].strip('"')
        except (BotoCoreError, ClientError) as error:
            raise self.unavailable(error) from error

    def put_bytes(self, key: str, body: bytes | BinaryIO) -> str:
        try:
            return self.get_client().put_object(Bucket=self.bucket, Key=key, Body=body)["ETag"].strip('"')
        except (BotoCoreError, ClientError) as error:
            raise self.unavailable(error) from error

    def delete_prefix(self, prefix: str) -> None:
        client = self.get_client()
        keys = [{"Key": o["Key"]} for o in self.list_objects(prefix)]
        for start in range(0, len(keys), 1000):
            client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys[start:start + 1000]})

    def unavailable(self, error: Exception) -> StorageUnavailable:
        return StorageUnavailable(f"S3 at {self._resolved_endpoint or self.endpoint} (bucket {self.bucket}): {error}")
