"""A curated table, declared: everything the change core needs to build, apply, check and show it.

One `TableDeclaration` per table says what Databricks' `AUTO CDC` / `APPLY CHANGES` and its
expectations say, in data rather than code: the columns (types, descriptions, nullability,
allowed values, the contract version that added each), the keys, where the raw objects land
and how they are laid out (CDC files or full-load snapshots, AWS DMS style), how deletes are
marked, whether an SCD type 2 history and a change feed are kept, the snapshot guards and the
tombstone retention. The core (core/apply/) reads nothing else about a table, so a new table is
a new declaration and nothing more; `definitions.py` builds each table's assets, checks, sensor
and job from its declaration.

Declarations are pydantic models: they load from a mapping (a YAML file) with every field
checked, and a mistake is one line naming the field and what it allows (`DeclarationError`).
"""

import datetime as dt
import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from lake_assets.core.errors import UsageError
from lake_assets.core.partition_fields import PARTITION_TYPES, TRANSFORM_TYPES, PartitionField, Transform, partition_field
from lake_assets.core.source_kind import SourceKind
from lake_assets.core.tables import TableFormat

__all__ = ["SourceKind", "TableDeclaration"]  # SourceKind: its own module, named here with the declaration

#: The Spark SQL types a column may have (DECIMAL(p,s) with its precision and scale).
SCALAR_TYPES = ("INT", "BIGINT", "STRING", "DATE", "BOOLEAN", "DOUBLE", "TIMESTAMP")
_DECIMAL = re.compile(r"DECIMAL\((\d{1,2}),\s*(\d{1,2})\)")
#: Table names: a letter, then letters, digits and underscores (also the Dagster asset key).
_NAME = re.compile(r"[a-z][a-z0-9_]*")
#: The types a `sequence_by` column may have.
SEQUENCE_TYPES = ("INT", "BIGINT", "DATE", "TIMESTAMP")
#: Characters a field delimiter may not be: a quote, line ends, a space, and the `?` the parser
#: puts in place of a byte that is not UTF-8 (core/apply/parse.py).
FORBIDDEN_DELIMITERS = ('"', "\n", "\r", " ", "?")
#: A data file's name ending: one dot and letters or digits (a compressed `.csv.gz` is not read).
_SUFFIX = re.compile(r"\.[A-Za-z0-9]+")


class DeclarationError(UsageError):
    """A declaration that cannot be used: the message names the field and what it allows."""


class RefusalReason(StrEnum):
    """Why a raw row (or a whole object) was quarantined: one code per rule, in every table's quarantine."""

    WRONG_FIELD_COUNT = "wrong_field_count"
    EMPTY_KEY = "empty_key"
    BAD_INTEGER = "bad_integer"
    BAD_DATE = "bad_date"
    BAD_FLAG = "bad_flag"
    BAD_VALUE = "bad_value"
    BAD_NUMBER = "bad_number"
    BAD_TIMESTAMP = "bad_timestamp"
    UNKNOWN_OPERATION = "unknown_operation"
    BAD_HEADER = "bad_header"
    UNREADABLE_FILE = "unreadable_file"
    BAD_ENCODING = "bad_encoding"
    UNTERMINATED_QUOTE = "unterminated_quote"
    NEGATIVE_KEY = "negative_key"
    NO_SEQUENCE = "no_sequence"
    BAD_BOOLEAN = "bad_boolean"
    UNDECLARED_COLUMN = "undeclared_column"
    MISSING_VALUE = "missing_value"
    DMS_LAYOUT = "dms_layout"  # a layout of DMS's the lake does not read (the detail names the DMS setting)
    EXPECTATION = "expectation"  # a row an `expect_or_drop` expectation refused (the detail names it)
    WRONG_PARTITION = "wrong_partition"  # a partition snapshot's row of another partition, or an object in no partition's folder


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Column(_Model):
    """One column of the table, as raw files carry it."""

    name: str
    type: str = Field(description="Spark SQL type: " + ", ".join(SCALAR_TYPES) + " or DECIMAL(p,s)")
    description: str = ""
    nullable: bool = True
    #: Values the column may hold, matched without case and surrounding spaces and stored as declared.
    allowed: tuple[str, ...] = ()
    #: A regular expression (RE2) every value of a STRING column must match whole, e.g. `[A-Z]{2}`.
    pattern: str | None = None
    #: The least value of an integer column (e.g. 0 for ids that are never negative).
    minimum: int | None = None
    #: The quarantine reason of a value the column refuses (default: by its type, `bad_integer`, ...).
    reason: RefusalReason | None = None
    #: The reason when it is below `minimum` (default `bad_value`).
    minimum_reason: RefusalReason | None = None
    #: The contract version that added the column (1: the first).
    since: int = Field(default=1, ge=1)
    #: Whether surrounding spaces are trimmed off a value (False: a STRING value is stored as written,
    #: e.g. fixed-width text or TPC-DS's trailing spaces; only an empty value is NULL).
    trim: bool = True

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not _NAME.fullmatch(name):
            raise ValueError(f"column name {name!r} must be lower-case letters, digits and _ (a letter first)")
        return name

    @field_validator("type")
    @classmethod
    def _type(cls, value: str) -> str:
        spelled = value.strip().upper()
        if spelled in SCALAR_TYPES:
            return spelled
        decimal = _DECIMAL.fullmatch(spelled)
        if decimal and 0 < int(decimal.group(1)) <= 38 and int(decimal.group(2)) <= int(decimal.group(1)):
            return f"DECIMAL({int(decimal.group(1))},{int(decimal.group(2))})"
        raise ValueError(f"type {value!r} is not one of {', '.join(SCALAR_TYPES)} or DECIMAL(p,s) (p <= 38)")

    @model_validator(mode="after")
    def _pattern(self) -> "Column":
        if not self.trim and (self.type != "STRING" or self.allowed):
            raise ValueError(f"column {self.name}: trim: false is for a STRING column without allowed values "
                             "(other values are read without their surrounding spaces)")
        if self.pattern is None:
            return self
        if self.type != "STRING" or self.allowed:
            raise ValueError(f"column {self.name}: pattern is for a STRING column without allowed values")
        import pyarrow as pa
        import pyarrow.compute as pc

        try:  # the engine's validation matches it with pyarrow's RE2
            pc.match_substring_regex(pa.array([""]), f"^(?:{self.pattern})$")
        except pa.ArrowInvalid as error:
            raise ValueError(f"column {self.name}: pattern {self.pattern!r} is not an RE2 regular expression "
                             f"({str(error).splitlines()[0]})") from None
        return self

    @property
    def is_integer(self) -> bool:
        return self.type in ("INT", "BIGINT")

    @property
    def refusal(self) -> RefusalReason:
        """The reason a value of this column is refused for."""
        if self.reason is not None:
            return self.reason
        if self.allowed or self.pattern is not None:
            return RefusalReason.BAD_VALUE
        return _TYPE_REASONS.get(self.type.split("(")[0], RefusalReason.BAD_VALUE)


_TYPE_REASONS = {"INT": RefusalReason.BAD_INTEGER, "BIGINT": RefusalReason.BAD_INTEGER, "DATE": RefusalReason.BAD_DATE,
                 "BOOLEAN": RefusalReason.BAD_BOOLEAN, "DOUBLE": RefusalReason.BAD_NUMBER,
                 "DECIMAL": RefusalReason.BAD_NUMBER, "TIMESTAMP": RefusalReason.BAD_TIMESTAMP}


class SequenceFrom(StrEnum):
    """Where the sequence of a source's files comes from (each row's: its file's, then its line)."""

    NAME = "name"  # the time in the file's name (DMS's) or its date folders; a snapshot without one: arrival
    ARRIVAL = "arrival"  # its arrival: after every file applied or held before it, whatever its name says


class Source(_Model):
    """Where one kind of raw object lands, and how its files are laid out.

    A CDC file's operation is DMS's first field (`I`, `U`, `D`) by default; `operation_column`
    names a declared column holding it instead (`APPLY AS DELETE WHEN operation = 'DELETE'`):
    `delete` and `truncate` are its values that delete a key and truncate the table, any other
    value (or none) is an upsert. `delimiter` and `suffix` say how the files are written when not
    as DMS's defaults (`,` between fields, names ending `.csv`): a `|`-separated `.dat` export."""

    prefix: str = Field(description="key prefix in the lake bucket, ending in /, e.g. raw/cdcload/")
    kind: SourceKind
    #: The CDC operation values: inserts and updates are upserts; `delete` marks a delete.
    delete: str = "D"
    upserts: tuple[str, ...] = ("I", "U")
    #: A declared column holding each CDC row's operation (instead of DMS's leading field).
    operation_column: str | None = None
    #: The operation value that truncates the table (`APPLY AS TRUNCATE WHEN`; None: none does).
    truncate: str | None = None
    #: What separates a record's fields (DMS's `CsvDelimiter`): one character, e.g. `|` or a tab.
    delimiter: str = ","
    #: How the names of the source's data files end (DMS writes `.csv`); other objects are ignored.
    suffix: str = ".csv"
    #: How the source's files are ordered: by the time their names or folders give (DMS's), or by
    #: their arrival (files that name no time: exports, re-delivered dimension files).
    sequence_from: SequenceFrom = SequenceFrom.NAME
    #: A snapshot source's objects are snapshots of one partition each, not of the table: a column
    #: (usually a `partition_by` one) whose value the object's folder names (`<column>=<value>/`,
    #: Hive's layout). The object replaces the rows of that value (Spark's `INSERT OVERWRITE ...
    #: PARTITION`) and leaves the others alone.
    partition: str | None = None

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, prefix: str) -> str:
        if not prefix.endswith("/") or prefix.startswith("/") or ".." in prefix.split("/"):
            raise ValueError(f"prefix {prefix!r} must be a relative key prefix ending in / (e.g. raw/orders/cdc/)")
        return prefix

    @field_validator("delimiter")
    @classmethod
    def _delimiter(cls, delimiter: str) -> str:
        printable = delimiter.isprintable() or delimiter == "\t"
        if len(delimiter) != 1 or delimiter in FORBIDDEN_DELIMITERS or delimiter.isalnum() or not printable:
            raise ValueError(f"delimiter {delimiter!r} must be one character: a tab or a sign other than a quote, "
                             "a space or ? (e.g. ',', '|', ';' or '\\t'), not a letter or digit")
        return delimiter

    @field_validator("suffix")
    @classmethod
    def _suffix(cls, suffix: str) -> str:
        if not _SUFFIX.fullmatch(suffix):
            raise ValueError(f"suffix {suffix!r} must be a file name ending such as .csv, .txt or .dat "
                             "(one dot, then letters and digits: compressed files are not read)")
        return suffix.lower()


class SnapshotRules(_Model):
    """When a full-load snapshot is held for `lake approve` instead of published (write-audit-publish,
    core/snapshot_guard.py): always when it is empty; when it has refused rows, unless told not to;
    when it would shrink the table by more than `max_shrink` of its rows, a count of rows before and
    after (`LAKE_FULLLOAD_MAX_SHRINK` sets it for every table)."""

    hold_rejected: bool = True
    max_shrink: float = Field(default=0.5, ge=0, le=1)


class Action(StrEnum):
    """What an expectation does to a row that fails it (DLT's `expect`, `expect_or_drop`, `expect_or_fail`)."""

    WARN = "warn"  # kept, counted
    DROP = "drop"  # quarantined (reason `expectation`), counted
    FAIL = "fail"  # the run fails before its commit; the objects stay pending


class Expectation(_Model):
    """A rule every row must meet: a Spark SQL condition over the declared columns."""

    name: str
    condition: str
    action: Action = Action.WARN

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not _NAME.fullmatch(name):
            raise ValueError(f"expectation name {name!r} must be lower-case letters, digits and _ (a letter first)")
        return name


class Freshness(_Model):
    """How stale the table may get: a Dagster freshness check fails past `max_lag_minutes` without an update."""

    max_lag_minutes: float = Field(gt=0)


class DayValues(StrEnum):
    """How a partition column names its day."""

    DATE = "date"  # the day itself (a DATE column)
    JULIAN_DAY = "julian_day"  # the day's Julian day number (an integer: 2440588 is 1970-01-01), as TPC-DS's date keys


#: The Julian day number of 1970-01-01.
JULIAN_EPOCH = 2440588
_EPOCH = dt.date(1970, 1, 1)


class DailyPartitions(_Model):
    """Dagster daily partitions for a table fed by partition snapshots of one day each: a
    partition per day from `start` to `end` (none: to today), so the UI shows the calendar, the
    days loaded and the days missing, and a backfill of a range of days is one run."""

    start: dt.date
    end: dt.date | None = None
    values: DayValues = DayValues.DATE

    @model_validator(mode="after")
    def _range(self) -> "DailyPartitions":
        if self.end is not None and self.end < self.start:
            raise ValueError(f"daily_partitions: end {self.end} is before start {self.start}")
        return self

    def day(self, value: object) -> dt.date | None:
        """The day a partition value names (None: NULL, or not a day)."""
        if self.values is DayValues.JULIAN_DAY:
            return _EPOCH + dt.timedelta(days=value - JULIAN_EPOCH) if isinstance(value, int) else None
        return value if isinstance(value, dt.date) else None

    def value(self, day: dt.date) -> dt.date | int:
        """The partition value naming `day`."""
        return JULIAN_EPOCH + (day - _EPOCH).days if self.values is DayValues.JULIAN_DAY else day

    def holds(self, day: dt.date) -> bool:
        return self.start <= day and (self.end is None or day <= self.end)


class TableDeclaration(_Model):
    """A curated table and everything the change core applies to it."""

    name: str
    description: str = ""
    group: str = Field(description="the Dagster asset group and `lake status` domain it belongs to")
    #: Delta at `curated/<name>`, or Iceberg as `<group>.<name>` in the lake's catalog.
    format: TableFormat = TableFormat.DELTA
    columns: tuple[Column, ...]
    keys: tuple[str, ...]
    sources: tuple[Source, ...]
    #: SCD type 2 history on the source's sequence axis, beside the SCD type 1 table.
    history: bool = True
    #: A change feed (Delta CDF semantics): a table beside a Delta table; an Iceberg table's is
    #: read from its snapshots.
    change_feed: bool = True
    guard: SnapshotRules = SnapshotRules()
    #: How long a deleted key is remembered against late, older changes.
    tombstone_retention_days: float | None = Field(default=7, ge=0)  # None (YAML `null`): kept for good
    owners: tuple[str, ...] = ()
    #: A declared column whose value orders a key's changes (`SEQUENCE BY`; INT, BIGINT, DATE or
    #: TIMESTAMP, never NULL); None: the file's DMS time, folders or arrival (core/sequence.py).
    sequence_by: str | None = None
    #: An update's NULL columns keep the key's current values (`IGNORE NULL UPDATES`).
    ignore_null_updates: bool = False
    #: Declared columns read from the raw files but not written to the table (`COLUMNS * EXCEPT`).
    except_columns: tuple[str, ...] = ()
    #: The history's versions change only when one of these columns does (`TRACK HISTORY ON`);
    #: a change to any other column updates the current version in place. None: every column.
    track_history: tuple[str, ...] | None = None
    #: ... or every column but these (`TRACK HISTORY ON * EXCEPT`).
    track_history_except: tuple[str, ...] = ()
    expectations: tuple[Expectation, ...] = ()
    freshness: Freshness | None = None
    #: The table's partitioning (`PARTITIONED BY`): columns (Delta: a folder per value; Iceberg:
    #: identity partitions) or, on Iceberg, transforms of them (`bucket(16, id)`, `days(ts)`:
    #: core/partition_fields.py), each spelled one way; a query filtering on a partitioned column
    #: reads only its files. The history and feed are not partitioned.
    partition_by: tuple[str, ...] = ()
    #: Dagster daily partitions for a table fed by partition snapshots whose column names a day
    #: (else its partitions are the column's values as they come).
    daily_partitions: DailyPartitions | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not _NAME.fullmatch(name):
            raise ValueError(f"table name {name!r} must be lower-case letters, digits and _ (a letter first)")
        return name

    @model_validator(mode="after")
    def _consistent(self) -> "TableDeclaration":
        names = [c.name for c in self.columns]
        if "op" in names:
            raise ValueError("columns: op is the name of DMS's operation field (a CDC file's first); name the column "
                             "otherwise, and declare it as a source's operation_column if it holds the operation")
        doubled = sorted({n for n in names if names.count(n) > 1})
        if doubled:
            raise ValueError(f"columns declared twice: {', '.join(doubled)}")
        if not self.keys:
            raise ValueError("keys: declare at least one key column")
        unknown = [k for k in self.keys if k not in names]
        if unknown:
            raise ValueError(f"keys: {', '.join(unknown)} not among the columns ({', '.join(names)})")
        late = [c.name for c in self.columns if c.name in self.keys and c.since != 1]
        if late:
            raise ValueError(f"keys: {', '.join(late)} must be in the first contract version (since: 1)")
        if not self.sources:
            raise ValueError("sources: declare where the raw objects land")
        prefixes = [s.prefix for s in self.sources]
        nested = [(a, b) for a in prefixes for b in prefixes if a != b and b.startswith(a)]
        if len(set(prefixes)) != len(prefixes) or nested:
            raise ValueError(f"sources: prefixes must not repeat or nest ({', '.join(prefixes)})")
        for field, listed in (("except_columns", self.except_columns), ("track_history", self.track_history or ()),
                              ("track_history_except", self.track_history_except)):
            unknown = [c for c in listed if c not in names]
            if unknown:
                raise ValueError(f"{field}: {', '.join(unknown)} not among the columns ({', '.join(names)})")
        if set(self.except_columns) & set(self.keys):
            raise ValueError(f"except_columns: the keys ({', '.join(self.keys)}) are always written")
        if self.track_history is not None and self.track_history_except:
            raise ValueError("track_history and track_history_except: declare one of them")
        if self.sequence_by is not None:
            if self.sequence_by not in names:
                raise ValueError(f"sequence_by: {self.sequence_by} not among the columns ({', '.join(names)})")
            kind = next(c for c in self.columns if c.name == self.sequence_by).type
            if kind not in SEQUENCE_TYPES:
                raise ValueError(f"sequence_by: {self.sequence_by} is {kind}; a sequence column is one of "
                                 f"{', '.join(SEQUENCE_TYPES)}")
        self._check_partitioning(names)
        kinds = [s.kind for s in self.sources]
        if len(set(kinds)) != len(kinds):
            raise ValueError("sources: declare one source per kind (one snapshot prefix, one cdc prefix)")
        if self.format is TableFormat.ICEBERG and not _NAME.fullmatch(self.group):
            raise ValueError(f"group: {self.group!r} names an Iceberg table's catalog namespace "
                             "(lower-case letters, digits and _, a letter first)")
        for source in self.sources:
            if source.partition is not None:
                self._check_partition_source(source, names)
            if source.sequence_from is SequenceFrom.ARRIVAL and source.kind is SourceKind.CDC and \
                    self.sequence_by is not None:
                raise ValueError(f"sources: {source.prefix}: sequence_from: arrival orders a CDC source's files, "
                                 f"sequence_by ({self.sequence_by}) its rows: declare one of them")
            if source.operation_column is not None and source.operation_column not in names:
                raise ValueError(f"sources: operation_column {source.operation_column} not among the columns "
                                 f"({', '.join(names)})")
        if self.daily_partitions is not None:
            self._check_daily_partitions(self.daily_partitions)
        doubled = sorted({e.name for e in self.expectations if [x.name for x in self.expectations].count(e.name) > 1})
        if doubled:
            raise ValueError(f"expectations declared twice: {', '.join(doubled)}")
        for expectation in self.expectations:
            _check_condition(expectation, names)
        versions = sorted({c.since for c in self.columns})
        if versions != list(range(1, versions[-1] + 1)):
            raise ValueError(f"columns: contract versions must run 1, 2, ... without a gap (found {versions})")
        order = [c.since for c in self.columns]
        if order != sorted(order):
            raise ValueError("columns: a later contract version's columns come after the earlier ones' "
                             "(a new version appends columns, as DMS appends a column added at the source)")
        return self

    def _check_partition_source(self, source: Source, names: list[str]) -> None:
        """A snapshot source of one partition per object names a written column of one of PARTITION_TYPES."""
        where = f"sources: {source.prefix}: partition {source.partition}"
        if source.kind is not SourceKind.SNAPSHOT:
            raise ValueError(f"{where}: a partition is for a snapshot source (each object a snapshot of one)")
        if source.partition not in names:
            raise ValueError(f"{where} is not among the columns ({', '.join(names)})")
        column = self.column(source.partition)
        if column.type not in PARTITION_TYPES or source.partition in self.except_columns or column.since != 1:
            raise ValueError(f"{where}: the column must be one of {', '.join(PARTITION_TYPES)}, written (not in "
                             "except_columns) and in the first contract version")

    def _check_daily_partitions(self, daily: DailyPartitions) -> None:
        """Daily partitions are of a partition snapshot source's column that names a day."""
        column = self.partition_snapshots
        if column is None:
            raise ValueError("daily_partitions: for a table fed by partition snapshots (a snapshot source's "
                             "`partition: <column>`)")
        kind = self.column(column).type
        wanted = ("DATE",) if daily.values is DayValues.DATE else ("INT", "BIGINT")
        if kind not in wanted:
            raise ValueError(f"daily_partitions: values: {daily.values.value} names a day by a "
                             f"{' or '.join(wanted)} column; {column} is {kind}")

    @field_validator("partition_by")
    @classmethod
    def _partition_by(cls, entries: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(partition_field(entry).text for entry in entries)

    def _check_partitioning(self, names: list[str]) -> None:
        fields = self.partition_fields
        unknown = [f.column for f in fields if f.column not in names]
        if unknown:
            raise ValueError(f"partition_by: {', '.join(unknown)} not among the columns ({', '.join(names)})")
        columns = [f.column for f in fields]
        if len(set(columns)) != len(columns):
            raise ValueError("partition_by: a column is partitioned twice")
        for field in fields:
            name, column = field.column, self.column(field.column)
            if field.transform is not Transform.IDENTITY and self.format is not TableFormat.ICEBERG:
                raise ValueError(f"partition_by: {field.text}: a transform is Iceberg's hidden partitioning; a Delta "
                                 "table is partitioned by a column's values (declare format: iceberg, or partition "
                                 "by a column)")
            allowed = TRANSFORM_TYPES[field.transform]
            if column.type not in allowed:
                what = "a partition column" if field.transform is Transform.IDENTITY else \
                    f"{field.transform.value}'s column"
                raise ValueError(f"partition_by: {name} is {column.type}; {what} is one of {', '.join(allowed)}")
            if name in self.except_columns:
                raise ValueError(f"partition_by: {name} is in except_columns (it is not written)")
            if column.since != 1:
                raise ValueError(f"partition_by: {name} must be in the first contract version (since: 1)")

    # --- what the core derives from it ---------------------------------------------------

    @property
    def table_name(self) -> str:
        """The table's one name in the registry, the ledger, its write lease and its staged runs: an
        Iceberg table's catalog identifier (`shop.orders`), a Delta table's name (`insurance`)."""
        return f"{self.group}.{self.name}" if self.format is TableFormat.ICEBERG else self.name

    @property
    def contracts(self) -> tuple["Contract", ...]:
        """Every contract version, oldest first: the data columns a raw file of that version carries."""
        newest = max(c.since for c in self.columns)
        return tuple(Contract(version=v, columns=tuple(c for c in self.columns if c.since <= v))
                     for v in range(1, newest + 1))

    @property
    def contract(self) -> "Contract":
        """The newest contract: the table's data columns."""
        return self.contracts[-1]

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    @property
    def key_types(self) -> dict[str, str]:
        """Each key column's Spark SQL type, in key order."""
        return {k: self.column(k).type for k in self.keys}

    @property
    def written(self) -> list[str]:
        """The newest contract's columns the table stores (`except_columns` left out)."""
        return [n for n in self.contract.names if n not in self.except_columns]

    @property
    def timed(self) -> bool:
        """Whether changes are ordered on a time axis (a file's time, or a DATE/TIMESTAMP
        `sequence_by` column), on which a full load's name or folder dates it; False for a counter
        (an LSN, a version number)."""
        return self.sequence_by is None or self.column(self.sequence_by).type in ("DATE", "TIMESTAMP")

    @property
    def tracked(self) -> list[str]:
        """The written columns a new history version follows (`track_history`)."""
        if self.track_history is not None:
            return [n for n in self.written if n in self.track_history]
        return [n for n in self.written if n not in self.track_history_except and n not in self.keys]

    @property
    def partition_fields(self) -> tuple[PartitionField, ...]:
        """The table's partition spec, field by field (`partition_by` parsed)."""
        return tuple(partition_field(entry) for entry in self.partition_by)

    @property
    def partition_snapshots(self) -> str | None:
        """The column whose partitions the snapshot source's objects are snapshots of (None: of the table)."""
        return next((s.partition for s in self.sources if s.partition is not None), None)

    def source(self, key: str) -> Source | None:
        """The source a raw object's key lands in (None: the key is no source's)."""
        return next((s for s in self.sources if key.startswith(s.prefix)), None)


def _check_condition(expectation: Expectation, names: list[str]) -> None:
    """An expectation's condition must be one Spark SQL expression over declared columns."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    try:
        parsed = sqlglot.parse_one(expectation.condition, dialect="spark")
    except ParseError as error:
        raise ValueError(f"expectations: {expectation.name}: {expectation.condition!r} is not a SQL condition "
                         f"({str(error).splitlines()[0]})") from None
    unknown = sorted({c.name for c in parsed.find_all(exp.Column)} - set(names))
    if unknown:
        raise ValueError(f"expectations: {expectation.name}: {', '.join(unknown)} not among the columns "
                         f"({', '.join(names)})")


class Contract(_Model):
    """One version of a table's contract: its data columns in file order."""

    version: int
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]


def load_declaration(data: dict, origin: str) -> TableDeclaration:
    """A declaration from a mapping (a YAML file's content); a mistake is one line naming the field."""
    try:
        return TableDeclaration.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the declaration"
        message = first["msg"].removeprefix("Value error, ")
        more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
        raise DeclarationError(f"{origin}: {where}: {message}{more}") from None
