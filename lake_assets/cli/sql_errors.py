"""One-line messages for the SQL mistakes `lake query` users make, in one place.

A parse error names its position and the offending token (never sqlglot's internals), an
unknown table names the closest lake tables, and the engine's analysis errors for unknown
columns (Sail's `attribute ObjectName([Identifier("x")]) is missing`, JVM Spark's
`UNRESOLVED_COLUMN`) or tables (`TABLE_OR_VIEW_NOT_FOUND`) become
`column x not found in t; did you mean y?`. Candidates come from difflib.
"""

import difflib
import logging
import re
from collections.abc import Callable, Iterable

import sqlglot

from lake_assets.core.errors import UsageError
from lake_assets.core.tables import TABLES, TableNotBuilt

#: sqlglot's own notes ("falling back to parsing as a Command") would reach the terminal; the
#: lake reports what it refuses itself, in one line. Every module that parses SQL imports this one.
logging.getLogger("sqlglot").setLevel(logging.ERROR)

#: The name of a column the engine could not resolve, by engine wording.
_UNRESOLVED_COLUMN = (
    re.compile(r"attribute ObjectName\(\[(?P<parts>[^\]]*)\]\) is missing"),  # Sail
    re.compile(r"UNRESOLVED_COLUMN\S*\] A column(?: or function parameter)? with name (?P<name>`[^ ]+`)"),  # JVM
    re.compile(r"cannot resolve '?(?P<name>`[^ ]+`)'? given input columns"),  # older JVM Spark
)
#: The name of a table or view the engine could not find.
_UNRESOLVED_TABLE = (
    re.compile(r"TABLE_OR_VIEW_NOT_FOUND\S*\] The table or view (?P<name>`[^ ]+`) cannot be found"),  # JVM
    re.compile(r"table or view not found: (?P<name>\S+)", re.IGNORECASE),  # Sail
)


def parse_error(sql: str, error: sqlglot.errors.SqlglotError) -> UsageError:
    """`cannot parse the query at line L, column C: unexpected 'TOKEN' (after '...')`."""
    details = getattr(error, "errors", None) or []
    if not details:  # a tokenizer error: its first line says where
        text = str(error).strip().splitlines()
        return UsageError(f"cannot parse the query: {text[0] if text else 'syntax error'}")
    first = details[0]
    token = (first.get("highlight") or "").strip()
    description = str(first.get("description") or "")
    what = description[0].lower() + description[1:] if description.startswith("Expecting") else "unexpected"
    where = f"line {first.get('line')}, column {first.get('col')}"
    before = " ".join((first.get("start_context") or "").split())
    after = f" (after {before!r})" if before else ""
    return UsageError(f"cannot parse the query at {where}: {what} {token!r}{after}" if token
                      else f"cannot parse the query at {where}: {what} end of query{after}")


def is_table_name(name: str) -> bool:
    """True for what reads as a table's name (a typo to hint at), not a path (``text.`/etc/x` ``)."""
    return re.fullmatch(r"\w+(\.\w+)*", name) is not None


def unknown_table(name: str) -> UsageError:
    """`table x is not a lake table; did you mean y? (see SHOW TABLES)`."""
    return UsageError(f"table {name} is not a lake table{_did_you_mean(name, TABLES)} (see SHOW TABLES)")


def missing_table(name: str) -> UsageError:
    """A registered table that nothing has created yet (the message says what builds it)."""
    return TableNotBuilt(name)


def unknown_column(name: str, tables: Iterable[str], columns: Iterable[str]) -> UsageError:
    """`column x not found in t1, t2; did you mean y?` (else the columns there are)."""
    columns = list(dict.fromkeys(columns))
    hint = _did_you_mean(name, columns)
    if not hint and columns:
        shown = ", ".join(columns[:12]) + (", ..." if len(columns) > 12 else "")
        hint = f"; its columns: {shown}"
    where = ", ".join(tables) or "the query's tables"
    return UsageError(f"column {name} not found in {where}{hint}")


def from_engine(error: Exception, tables: Iterable[str], columns: Callable[[], list[str]]) -> UsageError | None:
    """The one-line message for an engine's analysis error about a name, or None for others.

    `columns` is called only when a column is missing: it lists the columns of the tables
    the query reads (`tables`), the candidates of the hint.
    """
    text = str(error)
    for pattern in _UNRESOLVED_COLUMN:
        if match := pattern.search(text):
            name = _sail_name(match["parts"]) if "parts" in match.groupdict() else _unquote(match["name"])
            return unknown_column(name, tables, columns())
    for pattern in _UNRESOLVED_TABLE:
        if match := pattern.search(text):
            return unknown_table(_unquote(match["name"]))
    return None


def _sail_name(parts: str) -> str:
    """`Identifier("t"), Identifier("x")` -> `t.x`."""
    return ".".join(re.findall(r'Identifier\("([^"]*)"\)', parts)) or parts


def _unquote(name: str) -> str:
    """`` `t`.`x` `` -> `t.x` (JVM Spark quotes every part)."""
    return ".".join(part.strip("`") for part in re.findall(r"`[^`]*`|[^.]+", name))


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`; did you mean x?` for the closest candidate (by the whole name, else its last part), else ``."""
    candidates = list(candidates)
    short = name.rsplit(".", 1)[-1].lower()
    lowered = {c.lower(): c for c in candidates}
    matches = difflib.get_close_matches(name.lower(), lowered, n=1, cutoff=0.6) or \
        difflib.get_close_matches(short, lowered, n=1, cutoff=0.6) or \
        [c for c in lowered if c.rsplit(".", 1)[-1] == short][:1]
    return f"; did you mean {lowered[matches[0]]}?" if matches else ""
