"""`lake query --engine duckdb`'s allow-list against DuckDB's own function catalogue, and the
99 TPC-DS queries through the statement check (the attacks are in cli/test_query_attacks.py)."""

from collections.abc import Iterator

import duckdb
import pytest

from lake_assets.core.errors import UsageError
from lake_assets.resources.duckdb_reader import connect
from lake_assets.resources.duckdb_sandbox import check_read_only
from lake_assets.resources.duckdb_sql_allowed import DUCKDB_FUNCTIONS, TABLE_FUNCTIONS
from lake_assets_tests.helpers.tpcds_queries import tpcds_queries, with_tables_as_ctes


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection with the extensions the sandbox loads (their functions are in the catalogue)."""
    connection = connect(":memory:", "httpfs", "delta", "avro", "iceberg")
    yield connection
    connection.close()


def _catalogue(con: duckdb.DuckDBPyConnection, *kinds: str) -> set[str]:
    rows = con.execute("SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE function_type IN "
                       f"({', '.join('?' for _ in kinds)})", list(kinds)).fetchall()
    return {name for (name,) in rows}


def test_every_allowed_name_is_a_function_duckdb_has(con: duckdb.DuckDBPyConnection) -> None:
    assert DUCKDB_FUNCTIONS - _catalogue(con, "scalar", "aggregate", "macro") == set()
    assert TABLE_FUNCTIONS - _catalogue(con, "table") == set()


def test_every_other_table_function_is_refused(con: duckdb.DuckDBPyConnection) -> None:
    """Among them the ones that run SQL the check never saw (`json_execute_serialized_sql`, `query`)."""
    others = _catalogue(con, "table", "table_macro") - TABLE_FUNCTIONS
    assert {"json_execute_serialized_sql", "query", "query_table", "glob", "read_parquet", "duckdb_secrets"} <= others
    for name in sorted(others):
        with pytest.raises(UsageError, match=f"function {name}"):
            check_read_only(con, f"SELECT * FROM {name}('x')")


def test_every_other_function_is_refused(con: duckdb.DuckDBPyConnection) -> None:
    others = _catalogue(con, "scalar", "aggregate", "macro") - DUCKDB_FUNCTIONS
    assert {"json_serialize_plan", "json_serialize_sql", "current_setting", "getvariable", "write_log"} <= others
    for name in sorted(others):
        with pytest.raises(UsageError, match="function"):
            check_read_only(con, f'SELECT "{name}"(1) AS v')


@pytest.mark.parametrize("number, text", tpcds_queries())
def test_tpcds_queries_pass_the_check(number: int, text: str, con: duckdb.DuckDBPyConnection) -> None:
    check_read_only(con, with_tables_as_ctes(text))
