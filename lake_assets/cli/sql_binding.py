"""Bind a read-only query's table references to temporary views in the Spark session.

Each reference to a lake table, with its own time travel (`t VERSION AS OF n`,
`t TIMESTAMP AS OF 'ts'`, or the `--version/--as-of` flags), is bound to one view per
(table, version): the same table may be read at two versions in one query. Delta versions
pass the time-travel window check (`ensure_readable`) and are read as of that version
(`core/formats/delta_as_of.py`: from its data files, where Sail cannot time-travel);
Iceberg versions are snapshot ids (a timestamp resolves to the snapshot current then,
through pyiceberg). `table_changes('t', from[, to])` is bound to the rows `lake changes`
reads. The rewrite replaces only the table name and its time-travel clause: aliases and
TABLESAMPLE stay as written. Sail refuses time travel on views, so it happens here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from lake_assets.cli import sql_errors
from lake_assets.core.errors import UsageError
from lake_assets.core.tables import TABLES, TableFormat, table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lake_assets.cli.session import LakeSession

#: The one table function `lake query` allows.
TABLE_CHANGES = "table_changes"


def is_table_changes(reference: exp.Table) -> bool:
    """True for a `table_changes(...)` reference in FROM (the guard lets only this one through)."""
    return isinstance(reference.this, exp.Anonymous) and reference.this.name.lower() == TABLE_CHANGES


def time_travel_in(sql: str) -> str | None:
    """What in `sql` needs the Spark engine's binding (for DuckDB's refusal), or None."""
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except (sqlglot.errors.SqlglotError, RecursionError):
        return None  # DuckDB's own parser and checks report it (the caller checked the nesting first)
    for reference in tree.find_all(exp.Table):
        if is_table_changes(reference):
            return "table_changes()"
        if reference.args.get("version") is not None:
            return f"{reference.args['version'].name} AS OF"
    return None


@dataclass(frozen=True)
class TimeTravel:
    """A version (Delta version, Iceberg snapshot id) or an ISO timestamp to read a table at."""

    version: int | None = None
    timestamp: str | None = None

    @classmethod
    def from_clause(cls, clause: exp.Version, name: str) -> TimeTravel:
        value = clause.expression
        if clause.name.upper() == "VERSION":
            if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
                return cls(version=int(value.this))
            raise UsageError(f"VERSION AS OF takes a version number (Delta version or Iceberg snapshot id; see "
                             f"DESCRIBE HISTORY {name}), not {value.sql(dialect='spark')}")
        if isinstance(value, exp.Cast) and value.this.is_string:  # TIMESTAMP '2024-01-01 ...'
            value = value.this
        if isinstance(value, exp.Literal) and value.is_string:
            return cls(timestamp=value.this)
        raise UsageError(f"TIMESTAMP AS OF takes a timestamp literal such as '2024-01-31 12:00:00' (UTC unless "
                         f"it names a zone), not {value.sql(dialect='spark')}")

    def when(self) -> dt.datetime:
        """The timestamp as an aware datetime (naive means UTC)."""
        from lake_assets.core.formats.delta import parse_as_of

        try:
            return parse_as_of(self.timestamp or "")
        except UsageError:
            raise UsageError(f"TIMESTAMP AS OF / --as-of need an ISO timestamp, not {self.timestamp!r}") from None


@dataclass
class Binder:
    """Creates the views a query reads and rewrites the query to read them."""

    lake: LakeSession
    spark: SparkSession
    views: dict[tuple[str, TimeTravel | None], str] = field(default_factory=dict)
    frames: dict[str, DataFrame] = field(default_factory=dict)  # first frame bound per table, for hints

    def bind(self, sql: str, flags: TimeTravel | None = None) -> str:
        """`sql` reading the bound views; `flags` (--version/--as-of) apply where SQL says no version."""
        tree = sqlglot.parse_one(sql, read="spark")
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        changed = _sample_on_its_table(tree)
        for reference in list(tree.find_all(exp.Table)):
            if is_table_changes(reference):
                self._rename(reference, self._changes(reference.this), alias=None)
                changed = True
                continue
            name = ".".join(part.name for part in reference.parts).lower()
            clause = reference.args.get("version")
            if len(reference.parts) == 1 and name in ctes:
                if clause is not None:
                    raise UsageError(f"{clause.name} AS OF reads a lake table at a version, not the CTE {name}")
                continue
            if clause is not None and flags is not None:
                raise UsageError(f"give {name}'s version in SQL or with --version/--as-of, not both")
            travel = TimeTravel.from_clause(clause, name) if clause is not None else flags
            view = self._table(name, travel)
            if view != name or clause is not None:
                # unaliased, the view keeps the table's name, so `web_sales.ws_item_sk` still resolves
                self._rename(reference, view, alias=None if reference.alias else reference.name)
                changed = True
        return tree.sql(dialect="spark") if changed else sql

    def columns(self) -> list[str]:
        """The columns of the tables the query reads (candidates of an unknown column's hint)."""
        return [column for frame in self.frames.values() for column in frame.columns]

    @staticmethod
    def _rename(reference: exp.Table, view: str, alias: str | None) -> None:
        for part in ("db", "catalog", "version"):
            reference.set(part, None)
        reference.set("this", exp.to_identifier(view))
        if alias:
            reference.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))

    def _view(self, key: tuple[str, TimeTravel | None], frame: DataFrame, view: str | None = None) -> str:
        """Bind `frame` to a view (by default named after the table, and its version if any)."""
        name, travel = key
        if view is None:
            view = _view_name(name) if travel is None else f"{_view_name(name)}__at{len(self.views)}"
        frame.createOrReplaceTempView(view)
        self.views[key] = view
        self.frames.setdefault(name, frame)
        return view

    def _table(self, name: str, travel: TimeTravel | None) -> str:
        if (name, travel) in self.views:
            return self.views[(name, travel)]
        entry = table(name)
        if entry.format is TableFormat.ICEBERG:
            return self._view((name, travel), self._iceberg(name, travel))
        from lake_assets.core.formats.delta import ensure_readable, open_table

        if open_table(self.lake.storage, entry) is None:
            raise sql_errors.missing_table(name)
        if travel is None:
            return self._view((name, travel), self.spark.read.format(entry.format).load(entry.uri(self.lake.storage)))
        from lake_assets.core.formats.delta_as_of import read_as_of

        # inside the time-travel window, or a clear refusal
        version = ensure_readable(self.lake.storage, entry, travel.version, travel.when() if travel.timestamp else None,
                                  self.lake.settings.rules.time_travel_hours)
        return self._view((name, travel), read_as_of(self.spark, self.lake.storage, entry, version))

    def _iceberg(self, name: str, travel: TimeTravel | None) -> DataFrame:
        """The table at a snapshot: one that exists, named by id or by the time it was current."""
        from lake_assets.core.formats import iceberg  # pyiceberg: only for queries that read Iceberg

        current = iceberg.open_table(self.lake.storage, table(name))
        if current is None:
            raise sql_errors.missing_table(name)
        engine_name = table(name).engine_name  # qualified in its catalog: resolves on every engine
        if travel is None:
            return self.spark.sql(f"SELECT * FROM {engine_name}")
        if travel.version is not None:
            snapshot = current.snapshot_by_id(travel.version)
            if snapshot is None:
                raise UsageError(f"{name} has no snapshot {travel.version}; its snapshot ids are in "
                                 f"DESCRIBE HISTORY {name} (Iceberg versions are snapshot ids)")
        else:
            when = travel.when()
            snapshot = current.snapshot_as_of_timestamp(int(when.timestamp() * 1000))
            if snapshot is None:
                raise UsageError(f"{name} has no snapshot at or before {when.isoformat(timespec='seconds')}; "
                                 f"see DESCRIBE HISTORY {name}")
        return self.spark.sql(f"SELECT * FROM {engine_name} VERSION AS OF {snapshot.snapshot_id}")

    def _changes(self, call: exp.Anonymous) -> str:
        """Bind `table_changes('t', from[, to])` to the rows of `lake changes t --from-version ...`."""
        from pyspark.sql.pandas.types import from_arrow_schema

        from lake_assets.cli.changes import read_feed

        arguments = call.expressions
        if not 2 <= len(arguments) <= 3 or not (isinstance(arguments[0], exp.Literal) and arguments[0].is_string) \
                or not all(_is_whole_number(a) for a in arguments[1:]):
            raise UsageError("table_changes takes a table name and versions: table_changes('insurance', 1[, 3])")
        name = arguments[0].this.lower()
        if name not in TABLES:
            raise sql_errors.unknown_table(name)
        start, end = (int(a.this) for a in arguments[1:]) if len(arguments) == 3 else (int(arguments[1].this), None)
        key = (f"{TABLE_CHANGES}('{name}', {start}{'' if end is None else f', {end}'})", None)
        if key in self.views:
            return self.views[key]
        rows = read_feed(self.lake.storage, name, start, end)
        frame = self.spark.createDataFrame(rows.to_pandas(), schema=from_arrow_schema(rows.schema))
        return self._view(key, frame, f"{TABLE_CHANGES}__{_view_name(name)}__{len(self.views)}")


def _sample_on_its_table(tree: exp.Expression) -> bool:
    """Move a TABLESAMPLE written after an alias (`t AS a TABLESAMPLE (...)`) onto its table:
    sqlglot parses it as the SELECT's and would print it after WHERE, where Spark refuses it."""
    moved = False
    for select in tree.find_all(exp.Select):
        sample, source = select.args.get("sample"), select.args.get("from_")
        if sample is not None and source is not None and isinstance(source.this, exp.Table) \
                and source.this.args.get("sample") is None:
            select.set("sample", None)
            source.this.set("sample", sample)
            moved = True
    return moved


def _is_whole_number(value: exp.Expression) -> bool:
    return isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()


def _view_name(name: str) -> str:
    """The temporary view a lake table is bound to while a query runs."""
    return name.replace(".", "__")
