"""Which lake tables a read-only query reads, checked with sqlglot (imported by `lake query` only)."""

import sqlglot
from sqlglot import exp

from lake_assets.cli import sql_errors
from lake_assets.cli.sql_binding import is_table_changes
from lake_assets.core.errors import UsageError
from lake_assets.core.tables import TABLES


#: Functions that reach outside the lake (files, the JVM) are refused wherever they appear.
FORBIDDEN_FUNCTIONS = frozenset({"reflect", "try_reflect", "java_method", "read_files", "read_csv", "read_json",
                                 "read_parquet", "read_text", "input_file_name", "input_file_block_start",
                                 "input_file_block_length"})



def tables_in(sql: str) -> list[str]:
    """The lake tables a read-only query reads, each once (found by sqlglot, Spark dialect).

    Raises UsageError unless `sql` is exactly one query (SELECT / WITH / UNION, INTERSECT,
    EXCEPT / VALUES) whose every table reference is a registered lake table (dotted names
    such as `tpcds.web_sales` included) or one of its own CTEs: no DDL, DML or commands, no
    path-based tables (``delta.`s3://...` ``, ``text.`/etc/hostname` ``), no table functions
    but `table_changes` (bound by sql_binding). Generators stay usable where they read nothing:
    in the select list and in LATERAL VIEW (`explode`, `posexplode`, `inline`, `stack`); in
    FROM every other table function is refused, so no name has to be trusted there. Every
    attack this refuses is run against Sail in lake_assets_tests/cli/test_query_attacks.py.
    """
    try:
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except sqlglot.errors.SqlglotError as error:
        raise sql_errors.parse_error(sql, error) from None
    if len(statements) != 1:
        raise UsageError(f"lake query runs exactly one query, not {len(statements)} statements")
    tree = statements[0]
    if not isinstance(tree, (exp.Query, exp.Values)) or any(
        isinstance(node, (exp.DML, exp.DDL, exp.Command, exp.Set, exp.Cache, exp.Uncache, exp.Use))
        for node in tree.walk()
    ):
        kind = tree.key.upper() if not isinstance(tree, exp.Command) else str(tree.this).upper()
        raise UsageError(f"lake query is read-only: only SELECT, WITH, set operations and VALUES are allowed, not {kind}")
    for function in tree.find_all(exp.Func):
        name = (function.name if isinstance(function, exp.Anonymous) else function.sql_name()).lower()
        if name in FORBIDDEN_FUNCTIONS:
            raise UsageError(f"lake query does not allow the function {name}()")
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    names: list[str] = []
    for reference in tree.find_all(exp.Table):
        if is_table_changes(reference):  # the one table function: its arguments are checked when bound
            continue
        if not isinstance(reference.this, exp.Identifier):
            raise UsageError(f"lake query reads only the lake's tables by name, not the table function "
                             f"{reference.this.sql(dialect='spark')}")
        name = ".".join(part.name for part in reference.parts).lower()
        if len(reference.parts) == 1 and name in ctes:
            continue
        if name not in TABLES and sql_errors.is_table_name(name):  # a typo: name the closest lake table
            raise sql_errors.unknown_table(".".join(part.name for part in reference.parts))
        if name not in TABLES:
            raise UsageError(f"lake query reads only the lake's tables ({', '.join(sorted(TABLES))}), "
                             f"not {reference.sql(dialect='spark')}")
        if name not in names:
            names.append(name)
    return names
