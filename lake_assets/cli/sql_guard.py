"""Which lake tables a read-only query reads, checked with sqlglot (imported by `lake query` only)."""

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark

from lake_assets.cli import sql_errors
from lake_assets.cli.spark_sql_allowed import HINTS, OPERATORS, SPARK_FUNCTIONS, STATEMENTS, STRUCTURE, SYNTAX_FUNCTIONS
from lake_assets.cli.sql_binding import is_table_changes
from lake_assets.core import sql_nesting
from lake_assets.core.errors import UsageError
from lake_assets.core.tables import TABLES


class LakeSpark(Spark):
    """Spark's dialect, keeping the name each known function was called by (`meta["spark_name"]`):
    sqlglot parses `nvl(a, b)` as `Coalesce`, and the allow-list is of the names Spark runs."""

    ORIGINAL_NAME_META_KEY = "spark_name"


def tables_in(sql: str) -> list[str]:
    """The lake tables a read-only query reads, each once (found by sqlglot, Spark dialect).

    Raises UsageError unless `sql` is exactly one query (SELECT / WITH / UNION, INTERSECT,
    EXCEPT / VALUES) whose every table reference is a registered lake table (dotted names
    such as `tpcds.web_sales` included) or one of its own CTEs: no DDL, DML or commands, no
    path-based tables (``delta.`s3://...` ``, ``text.`/etc/hostname` ``), no table functions
    but `table_changes` (bound by sql_binding). Generators stay usable where they read nothing:
    in the select list and in LATERAL VIEW (`explode`, `posexplode`, `inline`, `stack`); in
    FROM every other table function is refused, so no name has to be trusted there. Every
    node of the query must be on the allow-list of cli/spark_sql_allowed.py (functions by the
    name they were called by), and the statement may nest only so deep (core/sql_nesting.py).
    Every attack this refuses is run against Sail in lake_assets_tests/cli/test_query_attacks.py.
    """
    try:
        sql_nesting.check_spark(sql)  # before the parser recurses into it
        statements = [s for s in sqlglot.parse(sql, read=LakeSpark) if s is not None]
    except sqlglot.errors.SqlglotError as error:
        raise sql_errors.parse_error(sql, error) from None
    except RecursionError:
        raise sql_nesting.too_deep() from None
    if len(statements) != 1:
        raise UsageError(f"lake query runs exactly one query, not {len(statements)} statements")
    tree = statements[0]
    if not isinstance(tree, STATEMENTS):
        kind = tree.key.upper() if not isinstance(tree, exp.Command) else str(tree.this).upper()
        raise UsageError(f"lake query is read-only: only SELECT, WITH, set operations and VALUES are allowed, not {kind}")
    _check_allowed(tree)
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


def _check_allowed(tree: exp.Expr) -> None:
    """Refuse a tree deeper than `MAX_DEPTH` or with a node the allow-list lacks (walked without recursion)."""
    depths = {id(tree): 0}
    for node in tree.walk(bfs=True):
        depth = depths.pop(id(node))
        if depth > sql_nesting.MAX_DEPTH:
            raise sql_nesting.too_deep(depth)
        depths.update((id(child), depth + 1) for child in node.iter_expressions())
        _check_node(node)


def _check_node(node: exp.Expr) -> None:
    name = node.meta.get(LakeSpark.ORIGINAL_NAME_META_KEY) or (node.name if isinstance(node, exp.Anonymous) else None)
    if isinstance(node, exp.Func) and name:
        allowed = HINTS if isinstance(node.parent, exp.Hint) else SPARK_FUNCTIONS
        if name.lower() not in allowed and not (isinstance(node.parent, exp.Table) and is_table_changes(node.parent)):
            raise UsageError(f"lake query does not allow the function {name.lower()}()")
    elif isinstance(node, exp.JoinHint):
        if node.name.lower() not in HINTS:
            raise UsageError(f"lake query does not allow the hint {node.name}")
    elif not isinstance(node, (*OPERATORS, *STRUCTURE)) and not (isinstance(node, exp.Func)
                                                                  and isinstance(node, SYNTAX_FUNCTIONS)):
        what = " ".join(node.sql(dialect="spark").split())
        raise UsageError(f"lake query does not allow {type(node).__name__} in a query: "
                         f"{what[:60]}{'...' if len(what) > 60 else ''}")
