"""`lake query`'s Spark allow-list against Sail's own function catalogue, and the 99 TPC-DS
queries through the guard (the attacks are in test_query_attacks.py)."""

import re

import pytest
from pysail.spark import SparkConnectServer
from pyspark.sql import SparkSession

from lake_assets.cli.spark_sql_allowed import SPARK_FUNCTIONS
from lake_assets.cli.sql_guard import tables_in
from lake_assets.core.errors import UsageError
from lake_assets_tests.helpers.tpcds_queries import tpcds_queries, with_tables_as_ctes


@pytest.mark.parametrize("number, text", tpcds_queries())
def test_tpcds_queries_pass_the_guard(number: int, text: str) -> None:
    assert tables_in(with_tables_as_ctes(text.replace('"', "`"))) == []  # their tables are the CTEs


@pytest.mark.integration
def test_every_allowed_name_is_in_sails_catalogue_and_every_other_is_refused() -> None:
    server = SparkConnectServer(ip="127.0.0.1", port=0)  # a bare Sail: its built-in functions only
    server.start(background=True)
    try:
        host, port = server.listening_address
        spark = SparkSession.builder.remote(f"sc://{host}:{port}").create()
        catalogue = {function.name for function in spark.catalog.listFunctions()}
        spark.stop()
    finally:
        server.stop()
    assert SPARK_FUNCTIONS - catalogue == set()
    others = {name for name in catalogue - SPARK_FUNCTIONS if re.fullmatch(r"[a-z_]\w*", name)}
    assert {"reflect", "java_method", "input_file_name", "current_user", "xpath"} <= others
    for name in sorted(others):
        assert _refused_as_a_function(name), name


def _refused_as_a_function(name: str) -> bool:
    """True if a call of `name` with one argument or none is refused for calling it."""
    for call in (f"{name}(1)", f"{name}()"):
        try:
            tables_in(f"SELECT {call} AS v")
        except UsageError as refused:
            if f"function {name}" in str(refused):
                return True
            continue  # sqlglot could not parse this form (it wants other arguments): try the next
        return False
    return False
