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
   statement, nested at most `core/sql_nesting.py`'s limits; a SELECT (which includes
   DESCRIBE, SUMMARIZE and FROM-first queries) or an EXPLAIN of one, without ANALYZE
   (`EXPLAIN ANALYZE` runs its statement and DuckDB classifies it as EXPLAIN all the same)
   and without options; CALL, COPY, EXPORT, ATTACH, INSTALL/LOAD, SET, PRAGMA and everything
   else are refused. Inside the SELECT, every node of DuckDB's parse tree must be on the
   allow-list of `duckdb_sql_allowed.py`: expression kinds, function names, the generator
   table functions (`range`, `generate_series`, `unnest`) and tables named as the lake names
   them (or a CTE in scope). So no table function reads by path or runs SQL text the check
   never saw (`json_execute_serialized_sql(json_serialize_sql('...'))` listed and read the
   warehouse's files directly before), and no table is named by a file path.

The lake's other DuckDB connections (the tests' oracle, TPC-DS generation and corrections)
are not sandboxed; only this path is.
"""

import json

import duckdb

from lake_assets.core import sql_nesting
from lake_assets.core.errors import LakeError, UsageError
from lake_assets.core.formats.delta import open_table
from lake_assets.core.tables import TABLES, TableFormat
from lake_assets.resources.catalog import CATALOG_NAME, find_catalog
from lake_assets.resources.duckdb_reader import add_s3_secret, connect, quote
from lake_assets.resources.duckdb_sql_allowed import (
    DUCKDB_FUNCTIONS,
    EXPRESSIONS,
    QUERY_NODES,
    TABLE_FUNCTIONS,
    TABLE_REFERENCES,
)
from lake_assets.resources.storage import LakeStorage

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
    sql_nesting.check_duckdb(sql)
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
    _check_allowed(_parse_tree(con, text))


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


def _parse_tree(con: duckdb.DuckDBPyConnection, text: str) -> dict:
    """DuckDB's own parse tree of one SELECT (`json_serialize_sql`); what it cannot serialize is refused."""
    serialized = con.execute("SELECT json_serialize_sql(?)", [text]).fetchone()[0]
    try:
        tree = json.loads(serialized)
    except RecursionError:  # json recurses per level: a statement deeper than any the limits let through
        raise sql_nesting.too_deep() from None
    if tree.get("error"):
        raise UsageError("lake query only reads: only SELECT queries are allowed")
    return tree


def _check_allowed(tree: dict) -> None:
    """Refuse a tree with a node the allow-list lacks (duckdb_sql_allowed.py) or deeper than
    `MAX_DEPTH` nodes, walked without recursion; CTE names are in scope below their query."""
    todo: list[tuple[object, frozenset[str], int]] = [(tree["statements"], frozenset(), 0)]
    while todo:
        value, ctes, depth = todo.pop()
        if isinstance(value, list):
            todo += [(child, ctes, depth) for child in value]
            continue
        if not isinstance(value, dict):
            continue
        node = _node_kind(value)
        if node is not None:
            depth += 1
            if depth > sql_nesting.MAX_DEPTH:
                raise sql_nesting.too_deep(depth)
        if node == "query":
            ctes = ctes | _cte_names(value)
        children: object = list(value.values())
        if node == "expression":
            _check_expression(value)
        elif node == "table":
            children = _check_table(value, ctes)
        todo.append((children, ctes, depth))


def _node_kind(value: dict) -> str | None:
    """"expression", "query" or "table" for the nodes of DuckDB's tree that are checked, else None."""
    if "class" in value:
        return "expression"
    if "modifiers" in value and "cte_map" in value:
        if value.get("type") not in QUERY_NODES:
            raise UsageError(f"lake query does not allow a {value.get('type')} in a query")
        return "query"
    if "query_location" in value and "alias" in value:
        if value.get("type") not in TABLE_REFERENCES:
            raise UsageError(f"lake query does not allow a {value.get('type')} in FROM")
        return "table"
    return None


def _cte_names(query: dict) -> frozenset[str]:
    entries = query.get("cte_map", {}).get("map", [])
    names = {str(entry.get("key", "")).lower() for entry in entries}
    if query.get("type") == "RECURSIVE_CTE_NODE":
        names.add(str(query.get("ctename", "")).lower())
    return frozenset(names)


def _check_expression(expression: dict) -> None:
    if expression["class"] not in EXPRESSIONS:
        raise UsageError(f"lake query does not allow a {expression['class']} expression")
    if expression["class"] in ("FUNCTION", "WINDOW"):
        _check_function(expression, DUCKDB_FUNCTIONS)


def _check_function(function: dict, allowed: frozenset[str]) -> None:
    """A call of an allowed name, unqualified or in DuckDB's own schema (its parser writes
    `SUBSTRING(...)`, `(a, b)` and `[1]` as calls of `main.substring`, `main.row`, `main.list_value`)."""
    name = str(function.get("function_name", ""))
    if function.get("schema") not in ("", "main") or function.get("catalog") not in ("", "system") \
            or name.lower() not in allowed:
        qualified = ".".join(part for part in (function.get("catalog"), function.get("schema"), name) if part)
        raise UsageError(f"lake query does not allow the function {qualified}()")


def _check_table(table: dict, ctes: frozenset[str]) -> object:
    """Check a FROM item; its parts still to walk (a table function's arguments, not the function)."""
    kind = table["type"]
    if kind == "TABLE_FUNCTION":
        function = table.get("function") or {}
        _check_function(function, TABLE_FUNCTIONS)
        return function.get("children", [])
    if kind == "BASE_TABLE" and not _is_lake_table(table, ctes):
        name = ".".join(str(table.get(part) or "") for part in ("catalog_name", "schema_name", "table_name")
                        if table.get(part))
        raise UsageError(f"lake query reads only the lake's tables ({', '.join(sorted(TABLES))}) "
                         f"or the query's own CTEs, not {name!r}")
    if kind == "SHOW_REF" and table.get("table_name"):
        raise UsageError("lake query describes a query or a lake table, not " + repr(table["table_name"]))
    return list(table.values())


def _is_lake_table(table: dict, ctes: frozenset[str]) -> bool:
    """A CTE in scope, or a lake table by its registry name, optionally in its catalog
    (`lake.tpcds.web_sales`, as the reports write it; `memory.main.insurance`)."""
    catalog, schema, name = (str(table.get(part) or "").lower() for part in ("catalog_name", "schema_name", "table_name"))
    if not catalog and not schema and name in ctes:
        return True
    if (catalog, schema) in (("memory", "main"), ("", "main")):
        catalog = schema = ""
    if catalog == CATALOG_NAME:
        catalog = ""
    return not catalog and (f"{schema}.{name}" if schema else name) in TABLES


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
