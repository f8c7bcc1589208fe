"""A REST catalog that names its warehouses and requires a token scope, as Apache Polaris does
(docker-compose.yml runs Polaris): LAKE_ICEBERG_CATALOG_WAREHOUSE and LAKE_ICEBERG_SCOPE reach
every client the lake builds.

Polaris cannot run here (no registry ships its server), so a fake stands in for the two calls
every client makes first, with Polaris's rules: `POST /v1/oauth/tokens` (credentials in the
form or as HTTP Basic) refuses a request without the scope (Polaris's TokenRequestValidator: `invalid_scope`), and `GET /v1/config`
knows only the catalog named in `warehouse` (else 404), answering with its name as the prefix.
The clients are the real ones: the lake's token fetch (Sail's token file), pyiceberg and
DuckDB's iceberg extension.
"""

import base64
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import duckdb
import pytest

from lake_assets.resources.catalog import CATALOG_NAME, CatalogUnavailable, LakeCatalog
from lake_assets.resources.spark import jvm_conf
from lake_assets.resources.storage import LakeStorage

SCOPE = "PRINCIPAL_ROLE:ALL"
CATALOG = "lake_warehouse"
KEY, SECRET = "lake-key", "lake-secret-value"


class FakePolaris(BaseHTTPRequestHandler):
    requests: list[tuple[str, str, dict]] = []

    def log_message(self, *args) -> None:  # quiet
        pass

    def _answer(self, status: int, body: dict) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        self.requests.append(("POST", self.path, form))
        if self.path != "/v1/oauth/tokens":
            return self._answer(404, {"error": {"message": self.path, "type": "NotFound", "code": 404}})
        if form.get("scope") != [SCOPE]:
            return self._answer(400, {"error": "invalid_scope", "error_description": "The scope is invalid"})
        basic = self.headers.get("Authorization", "")  # client_secret_basic, as DuckDB sends them
        if basic.startswith("Basic "):
            key, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
            form.update(client_id=[key], client_secret=[secret])
        if form.get("client_id") != [KEY] or form.get("client_secret") != [SECRET]:
            return self._answer(401, {"error": "invalid_client", "error_description": "bad credentials"})
        return self._answer(200, {"access_token": "token-1", "token_type": "bearer", "expires_in": 3600,
                                  "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query)
        self.requests.append(("GET", url.path, query))
        if self.headers.get("Authorization") != "Bearer token-1":
            return self._answer(401, {"error": {"message": "no token", "type": "NotAuthorized", "code": 401}})
        if url.path == "/v1/config":
            if query.get("warehouse") != [CATALOG]:
                return self._answer(404, {"error": {"message": f"Unable to find warehouse {query.get('warehouse')}",
                                                    "type": "NotFoundException", "code": 404}})
            return self._answer(200, {"defaults": {"default-base-location": "s3://warehouse/"},
                                      "overrides": {"prefix": CATALOG}})
        if url.path == f"/v1/{CATALOG}/namespaces":
            return self._answer(200, {"namespaces": [["tpcds"]]})
        return self._answer(404, {"error": {"message": url.path, "type": "NotFoundException", "code": 404}})


@pytest.fixture()
def fake_polaris() -> Iterator[str]:
    FakePolaris.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakePolaris)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _catalog(uri: str, tmp_path, monkeypatch: pytest.MonkeyPatch, **settings: str) -> LakeCatalog:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    storage = LakeStorage(endpoint="http://127.0.0.1:9", home=str(tmp_path), catalog_uri=uri, **settings).with_endpoint(
        "http://127.0.0.1:9")
    return LakeCatalog(uri=uri, warehouse=storage.warehouse, storage=storage, embedded=False)


def test_the_token_sails_file_holds_is_asked_for_in_the_scope(fake_polaris: str, tmp_path, monkeypatch) -> None:
    catalog = _catalog(fake_polaris, tmp_path, monkeypatch, catalog_scope=SCOPE, catalog_warehouse=CATALOG)
    assert catalog.token_file().read_text() == "token-1"
    env = catalog.sail_environment()
    assert f'warehouse="{CATALOG}"' in env["SAIL_CATALOG__LIST"]
    # without the scope Polaris refuses, and the lake says so in one line
    unscoped = _catalog(fake_polaris, tmp_path / "other", monkeypatch, catalog_warehouse=CATALOG)
    with pytest.raises(CatalogUnavailable, match="no token"):
        unscoped.fetch_token()


def test_pyiceberg_asks_for_the_named_warehouse_in_the_scope(fake_polaris: str, tmp_path, monkeypatch) -> None:
    catalog = _catalog(fake_polaris, tmp_path, monkeypatch, catalog_scope=SCOPE, catalog_warehouse=CATALOG)
    try:
        assert catalog.pyiceberg().list_namespaces() == [("tpcds",)]
    finally:
        catalog.close()
    assert ("GET", "/v1/config", {"warehouse": [CATALOG]}) in FakePolaris.requests


def test_duckdb_attaches_the_named_warehouse_in_the_scope(fake_polaris: str, tmp_path, monkeypatch) -> None:
    catalog = _catalog(fake_polaris, tmp_path, monkeypatch, catalog_scope=SCOPE, catalog_warehouse=CATALOG)
    for read_only in (False, True):
        FakePolaris.requests = []
        con = duckdb.connect()
        try:
            catalog.attach_duckdb(con, read_only=read_only)
            assert CATALOG_NAME in {row[0] for row in con.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
        finally:
            con.close()
        assert ("GET", "/v1/config", {"warehouse": [CATALOG]}) in FakePolaris.requests
        assert any(form.get("scope") == [SCOPE] for method, _, form in FakePolaris.requests if method == "POST")


def test_unset_the_clients_ask_for_the_table_bucket_as_before(tmp_path, monkeypatch) -> None:
    catalog = _catalog("http://127.0.0.1:9", tmp_path, monkeypatch)
    assert catalog.warehouse_ref == catalog.warehouse_uri == "s3://warehouse"
    assert catalog.scope == ""
    conf = jvm_conf("http://s3", catalog.uri, catalog.warehouse_ref, delta=False, scope=catalog.scope)
    assert conf["spark.sql.catalog.lake.warehouse"] == "s3://warehouse" and "spark.sql.catalog.lake.scope" not in conf
    named = _catalog("http://127.0.0.1:9", tmp_path, monkeypatch, catalog_scope=SCOPE, catalog_warehouse=CATALOG)
    conf = jvm_conf("http://s3", named.uri, named.warehouse_ref, delta=False, scope=named.scope)
    assert conf["spark.sql.catalog.lake.warehouse"] == CATALOG and conf["spark.sql.catalog.lake.scope"] == SCOPE
