"""`SHOW TABLES`, `DESCRIBE [EXTENDED] t` and `DESCRIBE HISTORY t` in `lake query`.

The engines lack most of these (Sail has no DESCRIBE HISTORY, and its catalog does not know
the lake's tables), so the lake answers them itself from the registry and the tables'
metadata (delta-rs, pyiceberg), on either engine, through the same renderer as a query.
Everything here only reads.
"""

import datetime as dt
import fnmatch
import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from lake_assets.cli import sql_errors
from lake_assets.cli.output import Format, render
from lake_assets.cli.session import LakeSession
from lake_assets.core import sql_nesting
from lake_assets.core.errors import UsageError
from lake_assets.core.tables import TABLES, LakeTable, TableFormat

_SHOW_TABLES = re.compile(
    r"^\s*SHOW\s+TABLES(?:\s+(?:IN|FROM)\s+`?(?P<namespace>\w+)`?)?(?:\s+(?:LIKE\s+)?'(?P<like>[^']*)')?\s*;?\s*$",
    re.IGNORECASE)
_SHOW = re.compile(r"^\s*SHOW\b", re.IGNORECASE)
_DESCRIBE = re.compile(r"^\s*DESC(RIBE)?\b", re.IGNORECASE)

#: Spark SQL's names for the types delta-rs and pyiceberg name otherwise.
_DELTA_TYPES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}
_ICEBERG_TYPES = {"long": "bigint", "timestamptz": "timestamp", "timestamp": "timestamp_ntz", "uuid": "string",
                  "fixed": "binary"}


@dataclass(frozen=True)
class ShowTables:
    namespace: str | None = None  # a namespace (`tpcds`, `default`) or a domain (`insurance`)
    like: str | None = None  # Spark's pattern: `*` any characters, `|` alternatives


@dataclass(frozen=True)
class Describe:
    table: LakeTable
    style: str = ""  # "", "EXTENDED" or "HISTORY"


def lake_statement(sql: str) -> ShowTables | Describe | None:
    """The SHOW/DESCRIBE statement `sql` is, or None for anything else (a query for the guard)."""
    if match := _SHOW_TABLES.match(sql):
        return ShowTables(match["namespace"] and match["namespace"].lower(), match["like"])
    if _SHOW.match(sql):
        raise UsageError("lake query answers SHOW TABLES [IN namespace] [LIKE 'pattern'] and no other SHOW; "
                         "see DESCRIBE [EXTENDED|HISTORY] <table> for the rest")
    if not _DESCRIBE.match(sql):
        return None
    usage = "DESCRIBE takes a lake table: DESCRIBE [TABLE] [EXTENDED|HISTORY] <table> (see SHOW TABLES)"
    try:
        sql_nesting.check_spark(sql)
        tree = sqlglot.parse_one(sql, read="spark")
    except (sqlglot.errors.SqlglotError, RecursionError):
        raise UsageError(usage) from None
    if not isinstance(tree, exp.Describe) or not isinstance(tree.this, exp.Table) \
            or not isinstance(tree.this.this, exp.Identifier) or tree.args.get("partition") is not None \
            or tree.this.args.get("version") is not None or str(tree.args.get("kind") or "TABLE").upper() != "TABLE":
        raise UsageError(usage)
    style = str(tree.args.get("style") or "").upper()
    if style not in ("", "EXTENDED", "FORMATTED", "HISTORY"):
        raise UsageError(usage)
    name = ".".join(part.name for part in tree.this.parts).lower()
    if name not in TABLES:
        raise sql_errors.unknown_table(name)
    return Describe(TABLES[name], "EXTENDED" if style == "FORMATTED" else style)


def answer(lake: LakeSession, statement: ShowTables | Describe, fmt: Format) -> None:
    if isinstance(statement, ShowTables):
        render(["table", "format", "domain"], show_tables(lake, statement), fmt)
    elif statement.style == "HISTORY":
        from lake_assets.cli.query import show_history  # the rows of `lake history t`

        show_history(lake, statement.table.name, fmt)
    else:
        render(["col_name", "data_type", "comment"], describe(lake, statement), fmt)


def show_tables(lake: LakeSession, statement: ShowTables) -> list[tuple]:
    """The registered tables that exist, in registry order: (table, format, domain)."""
    chosen = list(TABLES.values())
    if statement.namespace is not None:
        known = {_namespace(t) for t in chosen} | {str(t.domain) for t in chosen}
        if statement.namespace not in known:
            raise UsageError(f"no namespace or domain {statement.namespace}; there are {', '.join(sorted(known))}")
        chosen = [t for t in chosen if statement.namespace in (_namespace(t), str(t.domain))]
    if statement.like is not None:
        patterns = [p.strip().lower() for p in statement.like.split("|")]
        chosen = [t for t in chosen if any(fnmatch.fnmatchcase(n, p) for p in patterns
                                           for n in (t.name, t.name.rsplit(".", 1)[-1]))]
    existing = _existing_iceberg(lake) if any(t.format is TableFormat.ICEBERG for t in chosen) else set()
    from lake_assets.core.formats.delta import open_table

    return [(t.name, t.format.value, str(t.domain)) for t in chosen
            if (t.name in existing if t.format is TableFormat.ICEBERG else open_table(lake.storage, t) is not None)]


def describe(lake: LakeSession, statement: Describe) -> list[tuple]:
    """Spark's DESCRIBE rows (col_name, data_type, comment); EXTENDED adds the table's details.
    A column's comment is the one stored with the table (Delta's `comment`, Iceberg's `doc`), else
    its description in the table's declaration (what the Dagster UI shows)."""
    entry = statement.table
    if entry.format is TableFormat.ICEBERG:
        columns, details = _iceberg_facts(lake, entry)
    else:
        columns, details = _delta_facts(lake, entry)
    from lake_assets.core.column_descriptions import column_descriptions

    declared = column_descriptions(entry.name)
    rows: list[tuple] = [(name, data_type, comment or declared.get(name)) for name, data_type, comment in columns]
    if statement.style == "EXTENDED":
        rows += [("", "", None), ("# Detailed Table Information", "", None),
                 ("Table", entry.name, None), ("Format", entry.format.value, None),
                 ("Domain", str(entry.domain), None), ("Description", entry.description, None),
                 *((key, value, None) for key, value in details)]
    return rows


def _delta_facts(lake: LakeSession, entry: LakeTable) -> tuple[list[tuple[str, str, str | None]], list[tuple[str, object]]]:
    from deltalake.schema import PrimitiveType

    from lake_assets.core.formats.delta import open_table, row_count

    delta = open_table(lake.storage, entry)
    if delta is None:
        raise sql_errors.missing_table(entry.name)
    columns = [(f.name, _DELTA_TYPES.get(f.type.type, f.type.type) if isinstance(f.type, PrimitiveType)
                else f.type.to_json(), f.metadata.get("comment") or None) for f in delta.schema().fields]
    last = delta.history(limit=1)
    details = [("Location", entry.uri(lake.storage)), ("Version", delta.version()),
               ("Last commit", _iso(last[0].get("timestamp")) if last else None),
               ("Partitioning", ", ".join(delta.metadata().partition_columns) or "none"),
               ("Rows", row_count(delta))]
    return columns, details


def _iceberg_facts(lake: LakeSession, entry: LakeTable) -> tuple[list[tuple[str, str, str | None]], list[tuple[str, object]]]:
    from lake_assets.core.formats import iceberg

    table = iceberg.open_table(lake.storage, entry)
    if table is None:
        raise sql_errors.missing_table(entry.name)
    schema = table.schema()
    columns = [(f.name, _ICEBERG_TYPES.get(str(f.field_type), str(f.field_type)), f.doc or None)
               for f in schema.fields]
    partitioning = [schema.find_column_name(p.source_id) if str(p.transform) == "identity"
                    else f"{p.transform}({schema.find_column_name(p.source_id)})" for p in table.spec().fields]
    snapshot = table.current_snapshot()
    details = [("Location", table.location()), ("Snapshot", snapshot.snapshot_id if snapshot else None),
               ("Last commit", _iso(snapshot.timestamp_ms) if snapshot else None),
               ("Partitioning", ", ".join(partitioning) or "none"), ("Rows", iceberg.row_count(table))]
    return columns, details


def _existing_iceberg(lake: LakeSession) -> set[str]:
    """Names of the registered Iceberg tables the catalog holds (none without a catalog)."""
    from pyiceberg.exceptions import NoSuchNamespaceError

    from lake_assets.resources.catalog import find_catalog

    catalog = find_catalog(lake.storage)
    if catalog is None:
        return set()
    client = catalog.pyiceberg()
    names: set[str] = set()
    for namespace in {_namespace(t) for t in TABLES.values() if t.format is TableFormat.ICEBERG}:
        try:
            names |= {".".join(identifier) for identifier in client.list_tables(namespace)}
        except NoSuchNamespaceError:
            continue
    return names


def _namespace(entry: LakeTable) -> str:
    return entry.name.rpartition(".")[0] or "default"


def _iso(millis: int | None) -> str | None:
    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).isoformat() if millis else None
