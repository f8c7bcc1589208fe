"""What a raw object of a declared table is, decided from its key and its first bytes before a
row is read: the snapshot a full-load part belongs to, whether its first record is a header,
whether its records lead with DMS's operation field and its timestamp column, which contract
version wrote them -- or why it is refused whole (a `Refusal` naming the DMS setting at
stake). core/dms.py holds the DMS facts these rules follow. It runs on the engine, inside the
reader (reader.py), on the object's own bytes.

A file is read by what it says, never half one way and half another:

- a header (`AddColumnName`) is a first record of column names. It says everything: the
  operation (`Op`), the timestamp column (named as `LAKE_DMS_TIMESTAMP_COLUMN` says, or an
  undeclared name before the source's columns whose values are DMS timestamps) and the
  contract version (its names). A header naming columns no contract declares, after the
  newest contract's, is `undeclared_column` (pending again once a version declares them);
  any other header is `bad_header`, and when it does not name the key its first record is
  quarantined with the rows (it may be a data row: nothing is lost);
- without a header (DMS's default), the records say it: an operation field is a single
  letter where the key (an integer) would be; DMS's timestamp column is the field before
  the source's columns whose every value (in the sample) is `yyyy-MM-dd HH:mm:ss[.f...]`;
  the fields left are the contract version's columns. A DMS timestamp anywhere else (where
  a contract has a column of another type, or past the newest contract) means a layout the
  lake does not read: the file is refused whole (`dms_layout`, naming TimestampColumnName);
- records are split by the source's declared delimiter (`,` by default, DMS's CsvDelimiter);
  fields separated by another of `,`, `;`, `|` or a tab are refused whole (`dms_layout`,
  naming the delimiter to declare);
- the name: DMS's transaction files (`CDC_TXN-...`, PreserveTransactions) are refused
  whole, a CDC file with no time in its name or folders is refused (`no_sequence`).
"""

import csv
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lake_assets.core.apply.parse import RECORD, file_shape
from lake_assets.core.declaration import Contract, RefusalReason as Reason, SequenceFrom, Source, SourceKind, \
    TableDeclaration
from lake_assets.core.dms import OPERATION_HEADER, TRANSACTION_FILE, DmsLayout, is_operation, is_timestamp
from lake_assets.core.sequence import LOAD_PART, file_stamp, folder_pattern

#: The name of DMS's timestamp column while a file is parsed (dropped before its rows are validated).
DMS_TIMESTAMP = "_dms_timestamp"
OPERATION = "op"


@dataclass(frozen=True)
class Refusal:
    """Why an object is refused whole: every record quarantined with this reason and detail."""

    reason: Reason
    detail: str


@dataclass(frozen=True)
class FileLayout:
    """How to read an object's records: the name of each field in file order (`op`,
    DMS_TIMESTAMP, then the contract version's columns), whether the first record is a
    header, or why the object is refused whole."""

    columns: tuple[str, ...]
    header: bool
    contract: Contract
    refusal: Refusal | None = None

    @property
    def operation(self) -> bool:
        """The records carry their operation (I, U, D) first."""
        return OPERATION in self.columns



def snapshot_group(key: str) -> str:
    """Full-load objects that form one snapshot: DMS's parts of one folder (`LOAD00000001.csv`
    ... `LOAD0000000A.csv` ..., `SEGMENT1_LOAD00000001.csv`), else the object alone."""
    folder, _, name = key.rpartition("/")
    stem, dot, suffix = name.rpartition(".")
    return f"{folder}/LOAD*.{suffix.lower()}" if dot and LOAD_PART.fullmatch(stem) else key


def object_refusal(source: Source, key: str, dms: DmsLayout, timed: bool = True) -> Refusal | None:
    """Why the object at `key` (of `source`) is refused whole by its name alone, or None.
    `timed`: its changes are ordered by the time its name gives (False: by a `sequence_by` column)."""
    name = key.rpartition("/")[2]
    if TRANSACTION_FILE.fullmatch(name.rsplit(".", 1)[0]):
        return Refusal(Reason.DMS_LAYOUT, "a DMS transaction file (PreserveTransactions with CdcPath) holds every "
                                          "table's changes, each record naming its table: the lake reads one table's "
                                          "files; write per-table CDC files (PreserveTransactions=false)")
    if timed and source.kind is SourceKind.CDC and source.sequence_from is SequenceFrom.NAME and \
            file_stamp(key.removeprefix(source.prefix), folder_pattern(dms.folder_date_format)) is None:
        return Refusal(Reason.NO_SEQUENCE,
                       "the file's name or folders give no time to order its changes by: name it like DMS does "
                       f"(YYYYMMDD-HHMMSSfff.csv) or put it in {dms.folder_date_format} folders (DatePartitionEnabled)")
    return None


#: The first bytes of compressed data (a file compressed whole is never text a record of which could be
#: read): gzip, bzip2 (its magic, a block size, then the block's own magic), zstd, zip.
COMPRESSED = (("gzip", re.compile(rb"\x1f\x8b")), ("bzip2", re.compile(rb"BZh[1-9]\x31\x41\x59\x26\x53\x59")),
              ("zstd", re.compile(rb"\x28\xb5\x2f\xfd")), ("zip", re.compile(rb"PK\x03\x04")))


def file_layout(declaration: TableDeclaration, source: Source, data: bytes, dms: DmsLayout) -> FileLayout:
    """How to read the object of `source` whose bytes are `data`."""
    compressed = next((name for name, magic in COMPRESSED if magic.match(data)), None)
    if compressed is not None:  # refused whole: its bytes would only quarantine noise, record by record
        return _fields(declaration.contract, prefix=(), refusal=Refusal(
            Reason.BAD_ENCODING, f"{compressed}-compressed data, not text: refused whole, nothing of it applied; "
                                 "put it uncompressed"))
    declared = {len(c.names) + extra for c in declaration.contracts for extra in (0, 1, 2)}
    shape = file_shape(data, declared, source.delimiter)
    kind = source.kind
    current = declaration.contract
    if not shape.records:
        if kind is SourceKind.SNAPSHOT:  # DMS writes no file for an empty table: an upload cut short
            return _fields(current, prefix=(), refusal=Refusal(
                Reason.BAD_HEADER, "the file is empty: no header and no rows (an upload cut short?)"))
        return _fields(current)
    names = [f.strip().lower() for f in shape.records[0]]
    if all(_is_name(n) for n in names) or _names_a_contract(declaration, names):
        return _by_header(declaration, names, shape.records[0], shape.records[1:], dms)
    return _by_records(declaration, source, [r for r in shape.records if len(r) == shape.fields])


def dms_rows(rows: pa.Table, dms: DmsLayout) -> pa.Table:
    """`rows` (parsed by a FileLayout's columns) as the contract reads them: without DMS's
    timestamp column, a value written as CsvNullValue empty (NULL)."""
    if DMS_TIMESTAMP in rows.column_names:
        rows = rows.drop_columns([DMS_TIMESTAMP])
    if not dms.csv_null_value:
        return rows
    for index, name in enumerate(rows.column_names):
        if name not in (RECORD, OPERATION):
            column = rows[name]
            rows = rows.set_column(index, name, pc.if_else(pc.equal(column, dms.csv_null_value), "", column))
    return rows


# --- a header ---------------------------------------------------------------------------

def _by_header(declaration: TableDeclaration, names: list[str], raw: Sequence[str],
               records: Sequence[Sequence[str]], dms: DmsLayout) -> FileLayout:
    """The layout a header names; `records` are the records after it (for the timestamp's values)."""
    operation = bool(names) and names[0] == OPERATION_HEADER
    body = names[1:] if operation else names
    timestamp = _named_timestamp(body, dms)
    known = _known(declaration)
    current = declaration.contract
    if timestamp is None and body and body[0] not in known and all(
            is_timestamp(r[len(names) - len(body)]) for r in records if len(r) == len(names)):
        timestamp = 0  # an undeclared name where DMS puts its timestamp column, holding DMS timestamps
    data = [n for i, n in enumerate(body) if i != timestamp]
    contract = next((c for c in declaration.contracts if c.names == data), None)
    if contract is not None:
        columns = [DMS_TIMESTAMP if i == timestamp else n for i, n in enumerate(body)]
        return FileLayout(tuple(([OPERATION] if operation else []) + columns), True, contract)
    newest = current.names
    if data[:len(newest)] == newest:  # appended, as DMS appends a column added at the source
        undeclared = ", ".join(data[len(newest):])
        return _fields(current, header=True, refusal=Refusal(
            Reason.UNDECLARED_COLUMN, f"column(s) {undeclared} in the header are declared by no contract (checked "
                                      f"against contract v{current.version}); the file stays in the raw zone and "
                                      "applies once a contract version declares them"))
    accepted = " or ".join(",".join(c.names) for c in reversed(declaration.contracts))
    unknown = [n for n in body if n not in known]
    hint = f" (if {unknown[0]} is DMS's TimestampColumnName column, set LAKE_DMS_TIMESTAMP_COLUMN={unknown[0]})" \
        if unknown else ""
    # a first record that does not name the key may be a data row: it is quarantined with the others
    return _fields(current, header=all(k in names for k in declaration.keys), refusal=Refusal(
        Reason.BAD_HEADER, f"header must be {accepted} (DMS's AddColumnName, optionally Op first and the "
                           f"TimestampColumnName column before the data); found {','.join(raw)}{hint}"))


def _named_timestamp(body: list[str], dms: DmsLayout) -> int | None:
    """Where the header names DMS's timestamp column as LAKE_DMS_TIMESTAMP_COLUMN says, or None."""
    wanted = dms.timestamp_column.strip().lower()
    return body.index(wanted) if wanted and wanted in body else None


def _names_a_contract(declaration: TableDeclaration, names: list[str]) -> bool:
    """True if `names` are a contract's columns (after DMS's `Op`): a header, even of one-letter names."""
    body = names[1:] if names and names[0] == OPERATION_HEADER else names
    return any(body == c.names for c in declaration.contracts)


def _is_name(field: str) -> bool:
    """True if `field` reads as a column name: an identifier (a letter or `_`, then letters,
    digits, `_`, `$`, `#`), and no single letter (DMS's operation field)."""
    return len(field) > 1 and _NAME.fullmatch(field) is not None


# --- no header ----------------------------------------------------------------------------

def _by_records(declaration: TableDeclaration, source: Source, records: list[Sequence[str]]) -> FileLayout:
    """The layout headerless `records` (all of the file's most common field count) say."""
    fields = len(records[0])
    current = declaration.contract
    delimiter = _other_delimiter(declaration, records, source.delimiter)
    if delimiter is not None:
        return _fields(current, header=False, refusal=Refusal(
            Reason.DMS_LAYOUT, f"its fields are separated by {delimiter!r} (DMS's CsvDelimiter), not by the declared "
                               f"{source.delimiter!r}: declare `delimiter: {delimiter!r}` on the source {source.prefix} "
                               "if its files are written so; nothing of the file was applied"))
    operation, timestamp, contract = _dms_fields(declaration, records)
    data = fields - operation - timestamp
    prefix = ([OPERATION] if operation else []) + ([DMS_TIMESTAMP] if timestamp else [])
    misplaced = _misplaced_timestamp(records, len(prefix), contract)
    if misplaced is not None:
        where = f"where contract v{contract.version} has {misplaced[1]}" if contract and misplaced[1] \
            else "past every column a contract declares"
        return _fields(current, header=False, prefix=prefix, refusal=Refusal(
            Reason.DMS_LAYOUT, f"its records carry a DMS commit timestamp (TimestampColumnName) in field "
                               f"{misplaced[0] + 1}, {where}; DMS writes that column before the source's columns"
                               f"{' (after the operation)' if operation else ''}, where the lake reads it, or "
                               "wherever a header names it (AddColumnName=true); nothing of the file was applied"))
    if contract is None and data > len(current.names):
        return _fields(current, header=False, prefix=prefix, refusal=Refusal(
            Reason.UNDECLARED_COLUMN, f"its rows have {fields} fields, but the newest contract (checked against "
                                      f"contract v{current.version}) declares {len(current.names)} columns"
                                      f"{_besides(operation, timestamp)}; the file stays in the raw zone and applies "
                                      "once a contract version declares the new column(s)"))
    if source.kind is SourceKind.SNAPSHOT or operation or contract is not None:
        return _fields(contract or current, header=False, prefix=prefix)
    return _fields(current, header=False, prefix=[OPERATION])  # rows of no known shape: quarantined one by one


def _dms_fields(declaration: TableDeclaration, records: list[Sequence[str]]) -> tuple[bool, bool, Contract | None]:
    """Whether headerless `records` lead with DMS's operation field and its commit timestamp, and
    the contract whose width the rest has: the DMS reading the values suggest (most first fields
    one letter; every next field a timestamp) if a contract has that width, else a plainer one that
    a contract's width fits (a first column of grades or of times is data), else the DMS reading."""
    fields = len(records[0])
    readings = []
    for operation in ((True, False) if 2 * sum(is_operation(r[0]) for r in records) > len(records) else (False,)):
        first = 1 if operation else 0
        stamped = fields > first and all(is_timestamp(r[first]) for r in records)
        for timestamp in ((True, False) if stamped else (False,)):
            width = fields - first - timestamp
            readings.append((operation, timestamp, next((c for c in declaration.contracts if len(c.names) == width),
                                                        None)))
    return next((r for r in readings if r[2] is not None), readings[0])


def _other_delimiter(declaration: TableDeclaration, records: list[Sequence[str]], declared: str) -> str | None:
    """A delimiter other than the `declared` one that splits every one of `records` (each one
    field) into as many fields as a contract's records have (with or without DMS's operation), or None."""
    if len(records[0]) != 1:
        return None
    counts = {len(c.names) + extra for c in declaration.contracts for extra in (0, 1, 2)}
    for delimiter in (d for d in (",", ";", "|", "\t") if d != declared):
        if all(len(next(csv.reader([r[0]], delimiter=delimiter), [])) in counts for r in records):
            return delimiter
    return None


def _misplaced_timestamp(records: list[Sequence[str]], start: int,
                         contract: Contract | None) -> tuple[int, str] | None:
    """(field index, the contract's column there or '') of a field past `start` holding a DMS
    timestamp in every record where the contract has neither a string nor a timestamp column, or None."""
    columns = contract.columns if contract else ()
    for index in range(start, len(records[0])):
        column = columns[index - start] if index - start < len(columns) else None
        if column is not None and column.type in ("STRING", "TIMESTAMP"):  # a time is data there
            continue
        if all(is_timestamp(r[index]) for r in records):
            return index, column.name if column else ""
    return None


def _besides(operation: bool, timestamp: bool) -> str:
    extra = [what for what, present in (("the operation", operation), ("DMS's timestamp", timestamp)) if present]
    return f" besides {' and '.join(extra)}" if extra else ""


def _fields(contract: Contract, header: bool = False, prefix: Sequence[str] = (OPERATION,),
            refusal: Refusal | None = None) -> FileLayout:
    return FileLayout(tuple([*prefix, *contract.names]), header, contract, refusal)


def _known(declaration: TableDeclaration) -> set[str]:
    """Every name a header may give a column the lake knows (the contracts declared now)."""
    return {OPERATION_HEADER, *(name for c in declaration.contracts for name in c.names)}


_NAME = re.compile(r"[a-z_][a-z0-9_$#]*")  # fields are compared lower-cased
