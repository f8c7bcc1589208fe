"""S3 access for every part of `lake`: boto3 clients, delta-rs storage options, engine env.

`LakeStorage` is the storage settings (`settings.StorageSettings`) plus logic, free of
Dagster, so core/, the domains and the CLI use it without importing Dagster; the Dagster
resource holding it is `resources/storage_resource.py`. With no endpoint configured,
`running()` leases the embedded SeaweedFS server (attaching to the live one or starting
it) for the duration of a block; with one it talks to that endpoint (MinIO, AWS S3, ...).

What `running()` and `attached()` give is a *resolved* storage: the settings with a
reachable endpoint. A resolved storage makes its key pair (read from one place,
`settings.s3_credentials`), its S3 client, its delta-rs options and its Iceberg catalog
(resources/catalog.py) once, at their first use, and `close()` lets them go; a copy
(`with_endpoint`, `reading_only`) starts with none of them. So whoever holds a resolved
storage owns its clients: a run (the storage resource: one per run), a CLI command (one per
command), a sensor tick (one per tick). Nothing is cached per process.
"""

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import PrivateAttr

from lake_assets.core.errors import StorageUnavailable, UsageError
from lake_assets.resources.embedded_s3 import embedded_s3, running_server
from lake_assets.settings import (
    LakeSettings,
    S3Credentials,
    StorageSettings,
    embedded_reader_credentials,
    s3_credentials,
)

if TYPE_CHECKING:
    from lake_assets.resources.catalog import LakeCatalog

#: boto3's default session is not thread-safe while it builds a client (its clients are).
_boto3_lock = threading.Lock()


def boto3_client(service: str, **options: Any) -> Any:  # boto3's client types are generated at run time
    """A new boto3 client of `service`, built under the lock boto3's default session needs."""
    import boto3  # here, not at import: a command's embedded S3 server starts while boto3 loads

    with _boto3_lock:
        return boto3.client(service, **options)


class LakeStorage(StorageSettings):
    """The lake's object store: one bucket holding `raw/`, `staging/` and `curated/`."""

    _resolved_endpoint: str = PrivateAttr(default="")
    #: True: clients use the embedded server's read-only pair (see `reading_only`)
    _read_only: bool = PrivateAttr(default=False)
    #: made at first use, by this resolved storage only (see the module's docstring)
    _credentials: S3Credentials | None = PrivateAttr(default=None)
    _client: Any = PrivateAttr(default=None)
    _delta_options: dict[str, str] | None = PrivateAttr(default=None)
    _catalog: "LakeCatalog | None" = PrivateAttr(default=None)
    _closed: bool = PrivateAttr(default=False)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def from_settings(cls, settings: LakeSettings) -> "LakeStorage":
        return cls(**settings.storage.model_dump())

    @contextlib.contextmanager
    def running(self, while_starting: Callable[[], object] | None = None) -> Iterator["LakeStorage"]:
        """This storage with a reachable endpoint and bucket, and clients of its own, closed after the block.

        The embedded server is leased for the block: reused if one is up (e.g. `lake dev`'s),
        else started, running `while_starting` (the caller's imports) while it boots; it stops
        once its last user is done. Sensors use `attached()` instead, which never starts anything.
        """
        if not self.embedded:
            with contextlib.closing(self.with_endpoint(self.endpoint)) as resolved:
                resolved.ensure_bucket()
                yield resolved
            return
        with embedded_s3(Path(self.home), self.embedded_port, self.credentials(),
                         fallback=self.embedded_port_fallback, while_starting=while_starting) as server, \
                contextlib.closing(self.with_endpoint(server.endpoint)) as resolved:
            resolved.ensure_bucket()
            yield resolved

    def attached(self) -> "LakeStorage | None":
        """This storage if its endpoint is up already, without starting anything (for sensors)."""
        if not self.embedded:
            return self.with_endpoint(self.endpoint)
        server = running_server(Path(self.home))
        return self.with_endpoint(server.endpoint) if server else None

    def with_endpoint(self, endpoint: str) -> "LakeStorage":
        """This storage resolved to `endpoint`, with clients of its own (none made yet)."""
        return self._copy(endpoint, self._read_only)

    def _copy(self, endpoint: str, read_only: bool) -> "LakeStorage":
        copy = LakeStorage(**self.model_dump())  # private state (clients) is not copied
        copy._resolved_endpoint, copy._read_only = endpoint, read_only
        return copy

    def close(self) -> None:
        """Let this storage's clients go (the catalog's HTTP session, the S3 client's pool); a
        later use raises. The storage resource calls it when its run ends."""
        with self._lock:
            client, catalog = self._client, self._catalog
            self._client = self._catalog = self._delta_options = None
            self._closed = True
        if catalog is not None:
            catalog.close()
        if client is not None:
            client.close()

    # --- clients and options -------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        if not self._resolved_endpoint:
            raise RuntimeError("LakeStorage used outside `running()`: no endpoint resolved")
        return self._resolved_endpoint

    def credentials(self) -> S3Credentials:
        """The lake's S3 key pair (environment, or this lake's generated pair for the embedded server),
        read once per storage.

        A `reading_only()` storage on the embedded server gets its read-only pair instead. A storage
        on the AWS default credential chain (`credential_chain`) has no pair to give: its boto3 and
        delta-rs clients find their own (an AWS job's role).
        """
        if self.credential_chain:
            raise UsageError("LAKE_S3_CREDENTIAL_CHAIN=1 serves S3 through boto3 and delta-rs only; this needs "
                             "a key pair (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)")
        if self._credentials is None:
            home = Path(self.home)
            self._credentials = (embedded_reader_credentials(home) if self._read_only and self.embedded
                                 else s3_credentials(home, self.embedded))
        return self._credentials

    def reading_only(self) -> "LakeStorage":
        """This storage with clients that can only read and list (the embedded server's reader identity).

        On an external S3 (`LAKE_S3_ENDPOINT`) the configured pair is all there is: give
        `lake query --engine duckdb` a read-only key there through that pair's own policy.
        """
        return self._copy(self._resolved_endpoint, True)

    def get_client(self):  # boto3's client type is generated at run time
        """This storage's S3 client, made at its first use (boto3 clients are thread-safe)."""
        with self._lock:
            self._check_open()
            if self._client is None:
                from botocore.config import Config

                key, secret = (None, None) if self.credential_chain else self.credentials()
                self._client = boto3_client(
                    "s3", endpoint_url=self.endpoint_url, aws_access_key_id=key, aws_secret_access_key=secret,
                    region_name=self.region,
                    config=Config(s3={"addressing_style": "path"}, connect_timeout=3, read_timeout=60,
                                  retries={"max_attempts": 2, "mode": "standard"}),
                )
            return self._client

    def catalog(self) -> "LakeCatalog":
        """This storage's Iceberg REST catalog, its table bucket in place: found, checked and
        connected at its first use (resources/catalog.py); raises if there is none."""
        from lake_assets.resources.catalog import lake_catalog  # the catalog module imports this one

        with self._lock:
            self._check_open()
            if self._catalog is None:
                self._catalog = lake_catalog(self)
            return self._catalog

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("LakeStorage used after close(): its run or command has ended")

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def delta_storage_options(self) -> dict[str, str]:
        """Options for delta-rs (object_store) to read and commit to tables in this bucket (made once;
        callers must not change them)."""
        if self._delta_options is None:
            options = {
                "AWS_ENDPOINT_URL": self.endpoint_url,
                "AWS_ALLOW_HTTP": "true",
                "AWS_REGION": self.region,
                "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
                "conditional_put": "etag",
            }
            if not self.credential_chain:  # on the chain, delta-rs's own finds them (environment, IAM role)
                key, secret = self.credentials()
                options.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)
            self._delta_options = options
        return self._delta_options

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

    def get_bytes(self, key: str, length: int | None = None) -> tuple[bytes, str]:
        """The object's content (its first `length` bytes, if given) and its ETag (without quotes)."""
        window = {} if length is None else {"Range": f"bytes=0-{length - 1}"}
        try:
            response = self.get_client().get_object(Bucket=self.bucket, Key=key, **window)
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
