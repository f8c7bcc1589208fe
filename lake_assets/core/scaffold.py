"""A table declaration scaffolded from a sample CSV (`lake table add NAME --sample FILE`).

The sample's first records say what the declaration starts from: what separates their fields
(`,`, `|`, `;` or a tab: the one that splits most records into one count of fields), whether
the first one is a header (every field a name) or the columns are numbered (`c1`, `c2`, ...); whether records lead
with AWS DMS's operation field (`I`, `U`, `D`: a CDC file); each column's type, the narrowest
that reads every non-empty sampled value (INT, BIGINT, DATE, TIMESTAMP, DOUBLE, BOOLEAN, else
STRING); and the key, guessed as the first column whose sampled values are all present and
distinct (one named like an id first). What is guessed is marked in the file for review.
"""

import collections
import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from lake_assets.core.declaration import SourceKind

#: How many records of the sample are read.
SAMPLE_RECORDS = 1_000
_INT = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?")
_BOOLEAN = {"true", "false", "t", "f", "yes", "no"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_ $#-]*")
#: The operation field DMS writes first in a CDC record.
_DMS_OPERATION = re.compile(r"[IUDiud]")
#: The delimiters a sample is tried with, the first winning a tie.
DELIMITERS = (",", "|", ";", "\t")


@dataclass(frozen=True)
class Guess:
    """What the sample says: the columns (name, type), the guessed key, and how files are laid out."""

    columns: list[tuple[str, str]]
    key: str
    header: bool
    operation: bool  # records lead with DMS's operation field
    kind: SourceKind
    delimiter: str = ","


def guess(sample: bytes, kind: SourceKind | None = None) -> Guess:
    """The declaration a sample CSV suggests (see the module's docstring)."""
    text = sample.decode("utf-8-sig", errors="replace")  # -sig: a byte order mark is not the first name
    delimiter = _delimiter(text)
    records = [r for r in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter) if r][:SAMPLE_RECORDS + 1]
    if not records:
        raise ValueError("the sample holds no record")
    first = [f.strip() for f in records[0]]
    leads_with_operations = _leads_with_operations(records[1:])
    # every field a name, and not a headerless CDC record of names (`U,abc,def` among `I,...` records)
    header = all(_NAME.fullmatch(f) and not _NUMBER.fullmatch(f) for f in first) and \
        not (_DMS_OPERATION.fullmatch(first[0]) and leads_with_operations)
    body = records[1:] if header else records
    # a header names DMS's operation field `Op`; a headerless file's records lead with I, U or D
    operation = first[0].lower() == "op" if header else _leads_with_operations(body)
    names = [_column_name(n) for n in first]
    if operation:
        names = names[1:]
        body = [r[1:] for r in body]
    if not header:
        names = [f"c{i + 1}" for i in range(len(names))]
    width = len(names)
    values = [[r[i].strip() for r in body if len(r) == width and r[i].strip()]
              for i in range(width)]
    columns = [(name, _type(column)) for name, column in zip(names, values)]
    key = _key(names, [[r[i].strip() if i < len(r) else "" for r in body] for i in range(width)])
    return Guess(columns, key, header, operation, kind or (SourceKind.CDC if operation else SourceKind.SNAPSHOT),
                 delimiter)


def _delimiter(text: str) -> str:
    """The delimiter that splits the most sampled records into their most common count of fields
    (more than one), then into the most fields (`1|Smith, John|x`: `|` makes 3, `,` 2)."""
    def agreeing(delimiter: str) -> tuple[int, int]:
        try:
            counts = collections.Counter(len(r) for r in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
                                         if r)
        except csv.Error:
            return 0, 0
        fields, records = max(counts.items(), key=lambda c: (c[1], c[0]), default=(0, 0))
        return (records, fields) if fields > 1 else (0, 0)

    return max(DELIMITERS, key=lambda d: (*agreeing(d), -DELIMITERS.index(d)))


def _leads_with_operations(records: list[list[str]]) -> bool:
    """Most of `records` lead with DMS's operation field."""
    return bool(records) and 2 * sum(bool(r) and bool(_DMS_OPERATION.fullmatch(r[0].strip())) for r in records) > len(records)


def _column_name(field: str) -> str:
    """A header's field as a column name: lower-case, other characters as `_`."""
    name = re.sub(r"[^a-z0-9_]+", "_", field.strip().lower()).strip("_")
    return name if name and name[0].isalpha() else f"c_{name}"


def _type(values: list[str]) -> str:
    """The narrowest type every value reads as."""
    if not values:
        return "STRING"
    if all(_INT.fullmatch(v) for v in values):
        return "INT" if all(-(2**31) <= int(v) < 2**31 for v in values) else "BIGINT"
    if all(_DATE.fullmatch(v) for v in values):
        return "DATE"
    if all(_TIMESTAMP.fullmatch(v) for v in values):
        return "TIMESTAMP"
    if all(_NUMBER.fullmatch(v) for v in values):
        return "DOUBLE"
    if all(v.lower() in _BOOLEAN for v in values):
        return "BOOLEAN"
    return "STRING"


def _key(names: list[str], columns: list[list[str]]) -> str:
    """The first column whose values are all present and distinct, one named like an id first."""
    unique = [n for n, values in zip(names, columns) if values and all(values) and len(set(values)) == len(values)]
    named = [n for n in unique if re.search(r"(^|_)(id|key|code|no|number)$", n)]
    return (named or unique or names)[0]


def render(name: str, found: Guess, sample: str, table_format: str = "delta") -> str:
    """The declaration's YAML text, with what is guessed marked for review."""
    snapshot, cdc = f"raw/{name}/fullload/", f"raw/{name}/cdc/"
    written = ""  # how the files are written, when not as DMS's defaults
    if found.delimiter != ",":
        written += f", delimiter: {json.dumps(found.delimiter)}"
    suffix = PurePosixPath(sample).suffix.lower()
    if suffix not in ("", ".csv") and re.fullmatch(r"\.[a-z0-9]+", suffix):
        written += f", suffix: {suffix}"
    lines = [
        f"# `{name}`, scaffolded by `lake table add` from {sample}: review the marked lines, then",
        "# `lake table check`. The fields are described in the docs' \"Declare your own table\" page.",
        f"name: {name}",
        f"description: {name} (from {sample.rsplit('/', 1)[-1]})",
        f"group: {name}",
        f"format: {table_format}  # delta: curated/{name} in the bucket; iceberg: <group>.{name} in the catalog",
        f"keys: [{found.key}]  # review: guessed from the sample (its values are all present and distinct there)",
        "columns:  # review: types read from the sample's values",
    ]
    for column, kind in found.columns:
        required = ", nullable: false" if column == found.key else ""
        lines.append(f"  - {{name: {column}, type: {kind}{required}, description: \"\"}}")
    lines += [
        "sources:",
        f"  - {{prefix: {snapshot}, kind: snapshot{written}}}  # full loads (DMS's LOAD00000001.csv ...), with or "
        "without a header",
        f"  - {{prefix: {cdc}, kind: cdc{written}}}  # changes, DMS's operation I/U/D first, named by their time",
        "history: true  # an SCD type 2 history beside the table",
        "change_feed: true",
        "# sequence_by: a_column  # order changes by a column instead of the file's DMS time",
        "# ignore_null_updates: true",
        "# partition_by: [a_column]  # a folder per value: a date or region that queries filter on"
        if table_format != "iceberg" else
        "# partition_by: [a_column]  # or a transform of one: \"days(a_timestamp)\", \"bucket(16, an_id)\"",
        "# track_history_except: [a_column]",
        "# expectations:",
        "#   - {name: positive_amount, condition: \"amount >= 0\", action: drop}",
        "",
    ]
    return "\n".join(lines)
