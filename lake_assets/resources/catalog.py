"""The Iceberg REST catalog the lake's Iceberg tables live in, and a client for every engine.

By default the catalog is the one the embedded S3 server serves (`weed mini
-s3.port.iceberg=P`, its endpoint recorded in the server state file); `LAKE_ICEBERG_URI`
names another one. Tables live in a *table bucket* (`LAKE_ICEBERG_WAREHOUSE`, default
`warehouse`): SeaweedFS serves each table bucket as its own catalog, selected by
`warehouse=s3://<bucket>`, and creates table buckets through the S3 Tables API
(`s3tables:CreateTableBucket`), which `ensure_warehouse` calls.

Authentication is OAuth2 client credentials with the S3 key and secret
(`POST /v1/oauth/tokens`, tokens valid 3600 s), in the scope `LAKE_ICEBERG_SCOPE` when set.
pyiceberg and DuckDB fetch their own tokens; Sail reads a ready token from a file
(`bearer_access_token_file`) and re-reads it on a 401, so `token_file()` writes that file and
a daemon thread keeps it fresh.

A catalog server that names its warehouses itself (Apache Polaris, in docker-compose.yml: a
catalog's name) is asked for `LAKE_ICEBERG_CATALOG_WAREHOUSE` by every client (`warehouse_ref`);
the files stay in the bucket `LAKE_ICEBERG_WAREHOUSE` (`warehouse_uri`).

Every engine and DuckDB name the catalog `lake` (core/tables.py `ICEBERG_CATALOG`): the
pipeline's SQL names its tables `lake.tpcds.web_sales`, the same on Sail and JVM Spark. Sail
gets the catalog as its *default* catalog, so the short `tpcds.web_sales` also resolves there
(`lake query`); path tables (`delta.\\`s3://...\\``) and temporary views keep working beside it.
"""

import contextlib
import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from lake_assets.core.errors import StorageUnavailable
from lake_assets.core.tables import ICEBERG_CATALOG
from lake_assets.resources.embedded_s3 import running_server
from lake_assets.resources.storage import LakeStorage, boto3_client

#: The name of the REST catalog in Sail (its default catalog), JVM Spark and DuckDB (`ATTACH ... AS lake`).
CATALOG_NAME = ICEBERG_CATALOG
TOKEN_FILE = "iceberg-token"
#: Tokens last 3600 s; the file is rewritten when older than this.
TOKEN_REFRESH_SECONDS = 1200

_refreshers: dict[Path, threading.Thread] = {}
_refresh_lock = threading.Lock()


class CatalogUnavailable(StorageUnavailable):
    """The Iceberg REST catalog cannot be found, reached, or refused us."""


@dataclass(eq=False)
class LakeCatalog:
    """The REST catalog (its URI and table bucket) reached with the storage's credentials.

    Made by `LakeStorage.catalog()`, once per resolved storage (a run, a command), which
    closes it with its storage; its pyiceberg client is made at first use.
    """

    uri: str
    warehouse: str
    storage: LakeStorage
    embedded: bool
    _client: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def warehouse_uri(self) -> str:
        """Where the tables' files are: the table bucket."""
        return f"s3://{self.warehouse}"

    @property
    def warehouse_ref(self) -> str:
        """The warehouse every client asks the catalog for (the REST `warehouse` parameter)."""
        return self.storage.catalog_warehouse or self.warehouse_uri

    @property
    def scope(self) -> str:
        """The OAuth2 scope of the catalog's tokens ("": none asked for)."""
        return self.storage.catalog_scope

    @property
    def token_path(self) -> Path:
        return Path(self.storage.home).resolve() / TOKEN_FILE

    # --- tokens ------------------------------------------------------------------

    def fetch_token(self) -> str:
        """A fresh bearer token (client credentials grant with the S3 key and secret)."""
        key, secret = self.storage.credentials()
        form = {"grant_type": "client_credentials", "client_id": key, "client_secret": secret}
        if self.scope:
            form["scope"] = self.scope
        body = urllib.parse.urlencode(form).encode()
        try:
            with urllib.request.urlopen(f"{self.uri}/v1/oauth/tokens", data=body, timeout=10) as response:
                return json.load(response)["access_token"]
        except (urllib.error.URLError, OSError, KeyError, ValueError) as error:
            raise CatalogUnavailable(f"Iceberg REST catalog at {self.uri}: no token ({error})") from error

    def token_file(self) -> Path:
        """The token file Sail reads, fresh now and kept fresh by a daemon thread."""
        path = self.token_path
        stale = not path.exists() or time.time() - path.stat().st_mtime > TOKEN_REFRESH_SECONDS
        if stale:
            self._write_token(path)
        with _refresh_lock:
            thread = _refreshers.get(path)
            if thread is None or not thread.is_alive():
                thread = threading.Thread(target=self._keep_fresh, args=(path,), daemon=True,
                                          name=f"iceberg-token-{path}")
                thread.start()
                _refreshers[path] = thread
        return path

    def _write_token(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(self.fetch_token())
        partial.chmod(0o600)
        os.replace(partial, path)

    def _keep_fresh(self, path: Path) -> None:
        while True:
            time.sleep(TOKEN_REFRESH_SECONDS / 2)
            with contextlib.suppress(CatalogUnavailable, OSError):
                if time.time() - path.stat().st_mtime > TOKEN_REFRESH_SECONDS / 2:
                    self._write_token(path)

    # --- the warehouse -----------------------------------------------------------

    def ensure_warehouse(self) -> None:
        """Create the table bucket if it does not exist (S3 Tables API of the embedded server)."""
        if not self.embedded:
            return
        key, secret = self.storage.credentials()
        client = boto3_client("s3tables", endpoint_url=self.storage.endpoint_url, aws_access_key_id=key,
                              aws_secret_access_key=secret, region_name=self.storage.region)
        try:
            client.create_table_bucket(name=self.warehouse)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") not in ("ConflictException", "BucketAlreadyExists"):
                raise CatalogUnavailable(f"table bucket {self.warehouse}: {error}") from error
        except BotoCoreError as error:
            raise CatalogUnavailable(f"table bucket {self.warehouse}: {error}") from error
        finally:
            client.close()

    # --- clients -----------------------------------------------------------------

    def pyiceberg(self):  # pyiceberg is imported lazily (slow import)
        """This catalog's pyiceberg `RestCatalog` on the warehouse; commits go through the REST catalog.

        Made once per `LakeCatalog` (a token request and a config call); pyiceberg fetches a
        new token itself when the server answers 401.
        """
        with self._lock:
            if self._client is None:
                from pyiceberg.catalog.rest import RestCatalog

                key, secret = self.storage.credentials()
                scope = {"scope": self.scope} if self.scope else {}
                self._client = RestCatalog(
                    CATALOG_NAME, uri=self.uri, warehouse=self.warehouse_ref, credential=f"{key}:{secret}", **scope,
                    **{
                        "oauth2-server-uri": f"{self.uri}/v1/oauth/tokens",
                        "s3.endpoint": self.storage.endpoint_url,
                        "s3.access-key-id": key,
                        "s3.secret-access-key": secret,
                        "s3.region": self.storage.region,
                        "s3.force-virtual-addressing": "false",
                    },
                )
            return self._client

    def close(self) -> None:
        """Close the pyiceberg client's HTTP session, if one was made."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def drop_namespace(self, namespace: str) -> None:
        """Drop every table in `namespace`, purging its files (`lake demo --fresh`, tests)."""
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        client = self.pyiceberg()
        try:
            identifiers = client.list_tables(namespace)
        except NoSuchNamespaceError:
            return
        for identifier in identifiers:
            try:
                client.purge_table(identifier)
            except NoSuchTableError:
                pass
            except Exception:  # noqa: BLE001 - a catalog without purge support still drops
                client.drop_table(identifier)

    def sail_environment(self) -> dict[str, str]:
        """Environment that makes this catalog Sail's default catalog (read when Sail starts)."""
        return sail_catalog_environment(self.uri, self.warehouse_ref, self.token_file())

    def attach_duckdb(self, con, read_only: bool = False) -> None:  # a duckdb connection
        """Load DuckDB's iceberg/httpfs/avro extensions and attach the catalog as `lake`.

        `read_only` makes DuckDB refuse every write to the catalog (INSERT, DELETE, CREATE,
        also under `EXPLAIN ANALYZE`), and names the warehouse by its URI (`s3://warehouse`):
        DuckDB adds an attached database's path to the paths a sandboxed connection may open,
        and the bare name would be a local file in the working directory. (Named by its URI
        without options, DuckDB attached it read-only too, so writers keep the bare name.)
        """
        from lake_assets.resources.duckdb_extensions import load_extensions

        load_extensions(con, "httpfs", "avro", "iceberg")
        key, secret = self.storage.credentials()
        host = self.storage.endpoint_url.split("://", 1)[1]
        use_ssl = str(self.storage.endpoint_url.startswith("https")).lower()
        con.execute(
            f"CREATE OR REPLACE SECRET lake_s3 (TYPE s3, KEY_ID '{key}', SECRET '{secret}', ENDPOINT '{host}', "
            f"URL_STYLE 'path', USE_SSL {use_ssl}, REGION '{self.storage.region}')"
        )
        scope = f", OAUTH2_SCOPE '{self.scope}'" if self.scope else ""
        con.execute(
            f"CREATE OR REPLACE SECRET lake_iceberg (TYPE iceberg, CLIENT_ID '{key}', CLIENT_SECRET '{secret}', "
            f"OAUTH2_SERVER_URI '{self.uri}/v1/oauth/tokens'{scope})"
        )
        # a catalog that names its warehouses (Polaris) is asked for that name
        warehouse = self.storage.catalog_warehouse or (self.warehouse_uri if read_only else self.warehouse)
        con.execute(
            f"ATTACH IF NOT EXISTS '{warehouse}' AS {CATALOG_NAME} "
            f"(TYPE iceberg, SECRET lake_iceberg, ENDPOINT '{self.uri}'{', READ_ONLY' if read_only else ''})"
        )


def sail_catalog_environment(uri: str, warehouse_ref: str, token_file: Path | str) -> dict[str, str]:
    """Sail's variables for the REST catalog at `uri` (asked for the warehouse `warehouse_ref`) as its
    default catalog, named `lake`, its bearer token read from `token_file` (the Kubernetes manifests
    in resources/k8s/ set the same)."""
    catalogs = (f'[{{type="iceberg-rest", name="{CATALOG_NAME}", uri="{uri}", '
                f'warehouse="{warehouse_ref}", bearer_access_token_file="{token_file}"}}]')
    return {"SAIL_CATALOG__LIST": catalogs, "SAIL_CATALOG__DEFAULT_CATALOG": CATALOG_NAME}


def catalog_uri(storage: LakeStorage) -> str:
    """The configured REST catalog URI, else the embedded server's ("" when there is none)."""
    if storage.catalog_uri:
        return storage.catalog_uri.rstrip("/")
    if storage.embedded:
        server = running_server(Path(storage.home))
        if server and server.iceberg_endpoint:
            return server.iceberg_endpoint
    return ""


def find_catalog(storage: LakeStorage) -> LakeCatalog | None:
    """The lake's Iceberg catalog, or None when none is configured or running."""
    uri = catalog_uri(storage)
    if not uri:
        return None
    return LakeCatalog(uri=uri, warehouse=storage.warehouse, storage=storage,
                       embedded=storage.embedded and not storage.catalog_uri)


def lake_catalog(storage: LakeStorage) -> LakeCatalog:
    """A new client of the lake's Iceberg catalog, its table bucket made sure of; raises if there
    is none. Code asks its storage instead (`LakeStorage.catalog()`), which makes one per storage."""
    catalog = find_catalog(storage)
    if catalog is None:
        raise CatalogUnavailable(
            "no Iceberg REST catalog: the embedded S3 server is not running and LAKE_ICEBERG_URI is not set"
        )
    catalog.ensure_warehouse()
    return catalog
