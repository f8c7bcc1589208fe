"""`lake query --engine duckdb`: a DuckDB connection that can only read the lake's tables.

Two layers, each checked by the attack tier (lake_assets_tests/cli/test_query_attacks.py):

1. **DuckDB's own sandbox** (`sandboxed_connection`). Once the connection is set up
   (extensions loaded, S3 secret created, REST catalog attached, Delta views created) it is
   locked down with DuckDB's settings: `enable_external_access=false` (no local files, no
   other URLs, no ATTACH of files, no INSTALL/LOAD of extensions), `allowed_directories` =
   the Iceberg warehouse only, `allowed_paths` = the data files of the Delta tables' current
   versions only, no temporary directory (DuckDB would allow its spill directory),
   `allow_unredacted_secrets=false` (so `duckdb_secrets()` shows `redacted`), then
   `lock_configuration=true`, so no `SET`/`RESET` can undo any of it. The Iceberg catalog is
   attached `READ_ONLY`: DuckDB refuses INSERT, DELETE, UPDATE, CREATE on it, also under
   `EXPLAIN ANALYZE`. The S3 key exists only inside DuckDB's secret manager (no setting
   holds it: the credential settings httpfs copies from the environment are cleared;
   `getenv` does not exist in this build).

   Objects are read with the embedded server's **read-only identity** (S3 actions Read and
   List; `resources/embedded_s3.py`), so the server itself refuses any write: DuckDB checks
   paths, not the direction of access, and without it a `COPY ... TO` a path under the
   warehouse, or over one of the allowed Delta data files, was written (measured). On an
   external S3 the configured pair is used: give it a read-only policy there. The REST
   catalog is attached with the lake's pair (it shows the reader no table bucket), READ_ONLY.

   What this layer cannot stop, measured: `delta_scan` reads a Delta log through
   delta-kernel's own object store, which DuckDB's file-system checks do not see (it lists
   any prefix of the bucket, or a local directory, for `_delta_log/`; the data files it then
   wants are refused). The statement check below covers it.

2. **The statement check** (`check_read_only`), by DuckDB's own parser: exactly one
   statement; a SELECT (which includes DESCRIBE, SHOW, SUMMARIZE and FROM-first queries) or
   an EXPLAIN of one, without ANALYZE (`EXPLAIN ANALYZE` runs its statement and DuckDB
   classifies it as EXPLAIN all the same) and without options; CALL, COPY, EXPORT, ATTACH,
   INSTALL/LOAD, SET, the PRAGMAs that are not queries and everything else are refused
   (`PRAGMA version`, `PRAGMA show_tables` are SELECTs over table functions and pass).
   Inside the SELECT, table functions that read by path (`read_*`, `glob`, `delta_scan`, `iceberg_*`, `parquet_*`,
   `query`, ...) and tables named by a file path (`FROM '/etc/passwd'`) are refused.

The lake's other DuckDB connections (the tests' oracle, TPC-DS generation and corrections)
are not sandboxed; only this path is.
"""

import json
from collections.abc import Iterator

import duckdb

from lake_assets.core.errors import LakeError, UsageError
from lake_assets.core.formats.delta import open_table
from lake_assets.core.tables import TABLES, TableFormat
from lake_assets.resources.catalog import CATALOG_NAME, find_catalog
from lake_assets.resources.duckdb_reader import add_s3_secret, connect, quote
from lake_assets.resources.storage import LakeStorage

#: Table functions that read files or objects by path (or run SQL text), refused by name or prefix.
PATH_FUNCTIONS = frozenset({"glob", "sniff_csv", "query", "query_table", "csv_scan", "json_scan"})
PATH_FUNCTION_PREFIXES = ("read_", "parquet_", "iceberg_", "delta_")
#: Errors of the user's query (not of the lake): exit 2.
QUERY_ERRORS = (duckdb.CatalogException, duckdb.BinderException, duckdb.ParserException,
                duckdb.PermissionException, duckdb.InvalidInputException, duckdb.ConversionException)


def sandboxed_connection(storage: LakeStorage) -> duckdb.DuckDBPyConnection:
    """DuckDB seeing the lake's existing tables by name, and nothing else (module docstring)."""
    con = connect(":memory:", "httpfs", "delta")
    search_path, directories, files = ["memory.main"], [], []
    catalog = find_catalog(storage)
    if catalog is not None:
        catalog.attach_duckdb(con, read_only=True)  # the catalog knows only the lake's pair (embedded_s3.py)
        namespaces = con.execute("SELECT schema_name FROM duckdb_schemas() WHERE database_name = ? "
                                 "ORDER BY schema_name", [CATALOG_NAME]).fetchall()
        search_path += [f"{CATALOG_NAME}.{name}" for (name,) in namespaces]
        directories.append(f"{catalog.warehouse_uri}/")
    storage = storage.reading_only()
    add_s3_secret(con, storage)  # replaces the catalog's S3 secret: every object is read with the reader's pair
    for table in TABLES.values():
        delta = open_table(storage, table) if table.format is TableFormat.DELTA and "." not in table.name else None
        if delta is None:
            continue
        # pinned to the version whose files are allowed, so a commit meanwhile cannot break the read
        files += delta.file_uris()
        con.execute(f"CREATE VIEW memory.main.{table.name} AS "
                    f"SELECT * FROM delta_scan({quote(table.uri(storage))}, version := {int(delta.version())})")
    con.execute(f"SET search_path = {quote(','.join(search_path))}")
    lock_down(con, directories, files)
    return con


#: Settings httpfs fills from the process environment (AWS_SECRET_ACCESS_KEY, ...) and
#: `current_setting()` would show; cleared, since the lake's key is in the secret manager.
CREDENTIAL_SETTINGS = ("s3_access_key_id", "s3_secret_access_key", "s3_session_token", "http_proxy_password")


def lock_down(con: duckdb.DuckDBPyConnection, directories: list[str], paths: list[str]) -> None:
    """Allow only `directories` and `paths` from now on, and lock the configuration."""
    for name in CREDENTIAL_SETTINGS:
        con.execute(f"SET {name} = ''")
    con.execute("SET temp_directory = ''")
    con.execute("SET allowed_directories = ?", [directories])
    con.execute("SET allowed_paths = ?", [paths])
    con.execute("SET enable_external_access = false")
    con.execute("SET allow_community_extensions = false")
    con.execute("SET allow_unredacted_secrets = false")
    con.execute("SET lock_configuration = true")


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise UsageError unless `sql` is one read-only query (module docstring, layer 2)."""
    statements = con.extract_statements(sql)
    if len(statements) != 1:
        raise UsageError(f"give exactly one SQL statement, not {len(statements)}")
    statement = statements[0]
    text = statement.query
    if statement.type == duckdb.StatementType.EXPLAIN:
        text = _explained(text)
        inner = con.extract_statements(text)
        if len(inner) != 1 or inner[0].type != duckdb.StatementType.SELECT:
            raise UsageError("lake query only reads: EXPLAIN is allowed on a SELECT only")
    elif statement.type != duckdb.StatementType.SELECT:
        raise UsageError(f"lake query only reads: {statement.type.name} statements are refused")
    _check_references(con, text)


def _explained(text: str) -> str:
    """The statement an `EXPLAIN` explains; refuses EXPLAIN ANALYZE (it runs the statement)
    and EXPLAIN (options). Tokens come from DuckDB's tokenizer, so comments are skipped."""
    starts = [position for position, _ in duckdb.tokenize(text)]
    if len(starts) < 2:
        raise UsageError("lake query only reads: EXPLAIN needs a query")
    word = text[starts[1]:starts[2] if len(starts) > 2 else None].strip().upper()
    if word in ("ANALYZE", "ANALYSE") or word.startswith("("):
        raise UsageError("lake query only reads: EXPLAIN ANALYZE runs its statement and is refused; use EXPLAIN")
    return text[starts[1]:]


def _check_references(con: duckdb.DuckDBPyConnection, text: str) -> None:
    """Refuse path-reading table functions and tables named by a path, found in DuckDB's own
    parse tree (`json_serialize_sql`); a statement it cannot serialize is refused."""
    tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [text]).fetchone()[0])
    if tree.get("error"):
        raise UsageError("lake query only reads: only SELECT queries are allowed")
    for node in _nodes(tree):
        if node.get("type") == "TABLE_FUNCTION":
            name = str(node.get("function", {}).get("function_name", "")).lower()
            if name in PATH_FUNCTIONS or name.startswith(PATH_FUNCTION_PREFIXES):
                raise UsageError(f"lake query reads the lake's tables by name; the function {name}() is refused")
        if node.get("type") == "BASE_TABLE" and any(c in str(node.get("table_name", "")) for c in "/.:"):
            raise UsageError(f"lake query reads the lake's tables by name, not the file {node['table_name']!r}")


def _nodes(value: object) -> Iterator[dict]:
    if isinstance(value, dict):
        yield value
        for child in value.values():
            yield from _nodes(child)
    elif isinstance(value, list):
        for child in value:
            yield from _nodes(child)


def read_only_query(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[tuple]]:
    """Run one read-only statement; (column names, rows)."""
    check_read_only(con, sql)
    relation = con.sql(sql)
    return list(relation.columns), relation.fetchall()


def run(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[tuple]]:
    """`read_only_query` with DuckDB's errors as one-line lake errors (the user's query: exit 2)."""
    try:
        return read_only_query(con, sql)
    except QUERY_ERRORS as error:
        raise UsageError(f"DuckDB: {_first_line(error)}") from None
    except duckdb.Error as error:
        raise LakeError(f"DuckDB: {_first_line(error)}") from None


def query(storage: LakeStorage, sql: str) -> tuple[list[str], list[tuple]]:
    """`sql` over the lake's tables by name, on a sandboxed DuckDB connection."""
    con = sandboxed_connection(storage)
    try:
        return run(con, sql)
    finally:
        con.close()


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
