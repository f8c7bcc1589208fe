"""Read raw objects on the engine: fetch, decide the layout, parse tolerantly, validate.

The Dagster process hands the engine a small frame of the objects to read (key, kind, the
sequence prefix of their rows, or why they are refused by name), and the engine runs
`read_object` for each of them inside `mapInArrow`: the function fetches the object's bytes
itself (S3 credentials from the engine's own environment; the endpoint and bucket, which are
no secret, travel with the function), so no row and no raw byte ever passes through the
orchestrator. Sail runs it in its own Python; a JVM Spark in its Python workers. An object is
parsed whole, then validated and handed over a slice of rows at a time (`SLICE_ROWS`), so the
engine writes one slice while the next is validated; small objects (`SMALL_OBJECT_BYTES`) are
read in groups whose objects of one layout are validated as one table (`read_objects`).

The output is one frame of three kinds of rows (`KIND`):

- `row`: a valid row, typed as the declaration's newest contract, with its audit columns
  (`_operation`, `_source_file`, `_source_line`, `_sequence`: the object's prefix and the
  record number) and `_file`, `_record`;
- `refusal`: a record that was not applied, with its reason, detail, line and raw text; the
  key columns hold its key when the key fields themselves are well formed (a snapshot's
  refused row keeps the key's current row, `resolve.py`);
- `file`: one per object: the ETag and size of the bytes read, record counts, the contract
  version it was read as, and why it was refused whole (if it was).

A file that cannot be read as a whole (columns no contract declares, a header that is not
the declared one, no sequence in its name) is refused whole: every record is a `refusal` row
with that reason, and its `file` row says so.
"""

import collections
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_assets.core.apply.layout import FileLayout, dms_rows, file_layout
from lake_assets.core.apply.parse import ParsedFile, parse_csv
from lake_assets.core.apply.partitions import FolderPartition, folder_partition, outside
from lake_assets.core.apply.validate import OPERATION, RECORD, Refused, arrow_type, validate
from lake_assets.core.declaration import RefusalReason, Source, SourceKind, TableDeclaration
from lake_assets.core.dms import DmsLayout
from lake_assets.core.sequence import TIME_DIGITS, numbered

#: The operation of a snapshot's rows (a full load).
SNAPSHOT_OPERATION = "L"
FILE_INDEX, KIND = "_file", "_kind"
SOURCE_FILE, SOURCE_LINE, SEQUENCE = "_source_file", "_source_line", "_sequence"
REASON, DETAIL, RAW_TEXT = "_reason", "_detail", "_raw_text"


class RowKind(StrEnum):
    ROW = "row"
    REFUSAL = "refusal"
    FILE = "file"


#: The summary of one object (its `file` row).
SUMMARY = pa.schema([("_etag", pa.string()), ("_size", pa.int64()), ("_records", pa.int64()),
                     ("_valid", pa.int64()), ("_refused", pa.int64()), ("_refusal", pa.string()),
                     ("_contract", pa.int32())])


@dataclass(frozen=True)
class ObjectToRead:
    """One raw object for the engine to read, as the orchestrator planned it."""

    index: int
    key: str
    kind: SourceKind
    prefix: str | None  # the sequence of its rows without the row number (None: refused by name)
    refusal: str | None = None  # "reason: detail" when its name refuses it
    size: int = 0  # its bytes when it was listed (small ones are fetched several at once)


OBJECT_COLUMNS = "_file INT, key STRING, kind STRING, prefix STRING, refusal STRING, size BIGINT"


def output_schema(declaration: TableDeclaration) -> pa.Schema:
    """The reader's output: `_file`, `_kind`, `_record`, the newest contract's columns, the
    audit columns the reader knows, the refusal columns, then the summary columns."""
    data = [pa.field(c.name, arrow_type(c)) for c in declaration.contract.columns]
    return pa.schema([pa.field(FILE_INDEX, pa.int32()), pa.field(KIND, pa.string()), pa.field(RECORD, pa.int64()),
                      *data, pa.field(OPERATION, pa.string()), pa.field(SOURCE_FILE, pa.string()),
                      pa.field(SOURCE_LINE, pa.int64()), pa.field(SEQUENCE, pa.string()),
                      pa.field(REASON, pa.string()), pa.field(DETAIL, pa.string()), pa.field(RAW_TEXT, pa.string()),
                      *SUMMARY])


def spark_schema(schema: pa.Schema) -> str:
    """`schema` as a Spark DDL string (the reader's declared output for `mapInArrow`)."""
    return ", ".join(f"`{f.name}` {_SPARK_TYPES.get(str(f.type)) or _spark_decimal(f.type)}" for f in schema)


_SPARK_TYPES = {"int32": "INT", "int64": "BIGINT", "string": "STRING", "date32[day]": "DATE", "bool": "BOOLEAN",
                "double": "DOUBLE", "timestamp[us, tz=UTC]": "TIMESTAMP"}


def _spark_decimal(kind: pa.DataType) -> str:
    return f"DECIMAL({kind.precision},{kind.scale})"


# --- reading one object ------------------------------------------------------------------------

#: The byte order mark some tools write before UTF-8 text.
UTF8_BOM = b"\xef\xbb\xbf"


#: Valid rows validated and handed to the engine at a time: the engine writes one slice while the
#: next ones are validated (a 5M-row object's stage: 4.1 s against 5.7 s validated whole; in
#: quarter-million-row slices on two threads, web_sales' 720k rows read in 1.27 s against 2.10 s
#: in one slice).
SLICE_ROWS = 1 << 18
_Item = TypeVar("_Item")
_Result = TypeVar("_Result")
#: Slices validated at once, on threads (pyarrow's compute functions release the GIL).
VALIDATING_THREADS = 2


def in_order(function: Callable[[_Item], _Result], items: list[_Item], workers: int) -> Iterator[_Result]:
    """`function` of each of `items`, in their order, up to `workers` of them at once on threads;
    at most `workers` results wait for the caller."""
    if workers < 2 or len(items) < 2:
        yield from map(function, items)
        return
    with ThreadPoolExecutor(workers) as pool:
        running: collections.deque[Future[_Result]] = collections.deque()
        for item in items:
            running.append(pool.submit(function, item))
            if len(running) == workers:
                yield running.popleft().result()
        while running:
            yield running.popleft().result()


@dataclass(frozen=True)
class _Opened:
    """One object parsed, not yet validated: its source, layout, records, and why it is refused
    whole (None: it is not)."""

    obj: ObjectToRead
    source: Source
    shape: FileLayout
    parsed: ParsedFile
    size: int
    etag: str
    refusal: tuple[RefusalReason, str] | None

    @property
    def alike(self) -> tuple:
        """What objects validated together share: source, kind, layout and contract."""
        return (self.source.prefix, self.obj.kind, self.shape.columns, self.shape.contract.version)


def _open(declaration: TableDeclaration, dms: DmsLayout, obj: ObjectToRead, data: bytes, etag: str) -> _Opened:
    source = next(s for s in declaration.sources if s.kind is obj.kind and obj.key.startswith(s.prefix))
    text = data.removeprefix(UTF8_BOM)  # written by Excel and PowerShell: not part of the first field
    shape = file_layout(declaration, source, text, dms)
    parsed = parse_csv(obj.key, etag, text, list(shape.columns), has_header=shape.header, delimiter=source.delimiter)
    refusal = None if shape.refusal is None else (shape.refusal.reason, shape.refusal.detail)
    if obj.refusal is not None:  # refused by its name: that says it first
        reason, _, detail = obj.refusal.partition(": ")
        refusal = (RefusalReason(reason), detail)
    return _Opened(obj, source, shape, parsed, len(data), etag, refusal)


def read_object(declaration: TableDeclaration, dms: DmsLayout, obj: ObjectToRead, data: bytes,
                etag: str) -> Iterator[pa.Table]:
    """Every record of one object, as the reader's output rows (`output_schema`): its valid rows
    a slice at a time, then its refusals, then its `file` row."""
    yield from _output(declaration, dms, _open(declaration, dms, obj, data, etag))


#: Objects of at most this many bytes are read in groups (`read_objects`).
SMALL_OBJECT_BYTES = 1 << 20
#: The bytes of small objects read as one group.
GROUP_BYTES = 1 << 24
#: How far apart the record numbers of two objects validated together are set (a file has fewer).
_OBJECT_RECORDS = 1 << 40


def read_objects(declaration: TableDeclaration, dms: DmsLayout,
                 fetched: list[tuple[ObjectToRead, bytes, str]]) -> Iterator[pa.Table]:
    """The output of several small objects, the same as `read_object`'s of each: those read alike
    (one source, layout and contract) are validated as one table, so validation's cost per call
    (some thirty pyarrow calls per column) is paid once for them, not once per object (a day's
    object of TPC-DS `web_sales`, 400 rows: 9.5 ms read alone)."""
    opened = [_open(declaration, dms, *each) for each in fetched]
    groups: dict[tuple, list[_Opened]] = {}
    for each in opened:
        if each.refusal is None:
            groups.setdefault(each.alike, []).append(each)
    checked: dict[int, tuple[pa.Table, Refused]] = {}
    for members in groups.values():
        if len(members) > 1:
            checked.update(_checked_together(declaration, dms, members))
    for each in opened:
        yield from _output(declaration, dms, each, checked.get(each.obj.index))


def _checked_together(declaration: TableDeclaration, dms: DmsLayout,
                      members: list[_Opened]) -> dict[int, tuple[pa.Table, Refused]]:
    """The validation of `members`' rows as one table, split back per object (by its index)."""
    tables = []
    for number, member in enumerate(members):
        rows = member.parsed.rows
        at = rows.schema.get_field_index(RECORD)
        tables.append(rows.set_column(at, RECORD, pc.add(rows[RECORD], number * _OBJECT_RECORDS)))
    first = members[0]
    # one chunk per column: validation's thirty-odd calls per column cost per chunk (200 objects, 200 chunks)
    rows = pa.concat_tables(tables).combine_chunks()
    valid, refused = _checked(declaration, first.source, first.obj.kind, first.shape, dms, rows)
    owners = valid[RECORD].to_numpy() // _OBJECT_RECORDS
    if len(owners) and (np.diff(owners) < 0).any():  # validation keeps the rows' order; if not, sort them
        order = np.argsort(owners, kind="stable")
        valid, owners = valid.take(pa.array(order)), owners[order]
    bounds = np.searchsorted(owners, np.arange(len(members) + 1))
    refused_owners = refused.records // _OBJECT_RECORDS
    out = {}
    for number, member in enumerate(members):
        mine = valid.slice(bounds[number], bounds[number + 1] - bounds[number])
        mine = mine.set_column(mine.schema.get_field_index(RECORD), RECORD,
                               pc.subtract(mine[RECORD], number * _OBJECT_RECORDS))
        picked = np.flatnonzero(refused_owners == number)
        theirs = Refused(refused.records[picked] - number * _OBJECT_RECORDS, [refused.reasons[i] for i in picked],
                         [refused.details[i] for i in picked])
        out[member.obj.index] = (mine, theirs)
    return out


def _output(declaration: TableDeclaration, dms: DmsLayout, opened: _Opened,
            checked: tuple[pa.Table, Refused] | None = None) -> Iterator[pa.Table]:
    """An object's output rows: its valid rows (validated a slice at a time, unless `checked` with
    others already), its refusals, its `file` row."""
    schema = output_schema(declaration)
    obj, source, shape, parsed, refusal = opened.obj, opened.source, opened.shape, opened.parsed, opened.refusal
    valid_rows = 0
    if refusal is not None:  # refused whole: every record, with the reason
        records = np.sort(np.concatenate([parsed.rows[RECORD].to_numpy(), parsed.rejected.records]))
        refused = Refused(records, [refusal[0].value] * len(records), [refusal[1]] * len(records))
    else:
        refused = Refused(parsed.rejected.records, parsed.rejected.reasons, parsed.rejected.details)

        def output(rows: pa.Table | tuple[pa.Table, Refused]) -> tuple[pa.Table, Refused]:
            valid, invalid = rows if isinstance(rows, tuple) else \
                _checked(declaration, source, obj.kind, shape, dms, rows)
            valid, misplaced = _placed(declaration, source, obj, valid)
            return _row_rows(obj, parsed, valid, schema), invalid + misplaced

        slices: list = [checked] if checked is not None else \
            [parsed.rows.slice(start, SLICE_ROWS) for start in range(0, parsed.rows.num_rows, SLICE_ROWS)]
        for rows, invalid in in_order(output, slices, VALIDATING_THREADS):
            refused = refused + invalid
            valid_rows += rows.num_rows
            if rows.num_rows:
                yield rows
    if len(refused):
        yield _refusal_rows(declaration, obj, parsed, shape, refused, schema, source)
    summary = {FILE_INDEX: pa.array([obj.index], pa.int32()), KIND: pa.array([RowKind.FILE.value]),
               SOURCE_FILE: pa.array([obj.key]), "_etag": pa.array([opened.etag]),
               "_size": pa.array([opened.size], pa.int64()),
               "_records": pa.array([parsed.record_count], pa.int64()),
               "_valid": pa.array([valid_rows], pa.int64()), "_refused": pa.array([len(refused)], pa.int64()),
               "_refusal": pa.array([f"{refusal[0].value}: {refusal[1]}" if refusal else None], pa.string()),
               "_contract": pa.array([shape.contract.version], pa.int32())}
    yield _conformed(summary, 1, schema)


def _checked(declaration: TableDeclaration, source: Source, kind: SourceKind, shape: FileLayout, dms: DmsLayout,
             rows: pa.Table) -> tuple[pa.Table, Refused]:
    """Parsed rows split into typed valid rows and refusals, by the declaration's rules."""
    # a snapshot's rows are `L`; CDC rows without DMS's operation field (CdcInsertsOnly) are inserts
    cdc = kind is SourceKind.CDC
    operation = SNAPSHOT_OPERATION if not cdc else None if shape.operation else source.upserts[0]
    return validate(declaration, dms_rows(rows, dms), operation, source.delete, source.upserts,
                    source.operation_column if cdc else None, source.truncate)


def _placed(declaration: TableDeclaration, source: Source, obj: ObjectToRead,
            valid: pa.Table) -> tuple[pa.Table, Refused]:
    """An object's valid rows with what its place gives them: `_sequence` when `sequence_by` gives
    CDC rows theirs (the rest from the object's prefix), and a partition snapshot's rows of other
    partitions refused."""
    refused = Refused.none()
    cdc = obj.kind is SourceKind.CDC
    if cdc and declaration.sequence_by is not None:
        valid, refused = _sequenced(valid, declaration.sequence_by, obj.prefix or "")
    if not cdc and source.partition is not None:
        partition = folder_partition(declaration, source, obj.key)
        if isinstance(partition, FolderPartition):  # else refused whole by its place (plan.py)
            valid, misplaced = _in_partition(valid, source.partition, partition)
            refused = refused + misplaced
    return valid, refused


def _in_partition(valid: pa.Table, column: str, partition: FolderPartition) -> tuple[pa.Table, Refused]:
    """A partition snapshot's valid rows split into its partition's and the others (`wrong_partition`)."""
    misplaced = outside(valid[column], partition)
    count = int(pc.sum(misplaced.cast(pa.int64())).as_py() or 0)
    if not count:
        return valid, Refused.none()
    detail = (f"{column} is not the value its object's folder {partition.folder} names: the object replaces that "
              "partition only; put the row in its own partition's object")
    refused = Refused(valid[RECORD].filter(misplaced).to_numpy(), [RefusalReason.WRONG_PARTITION.value] * count,
                      [detail] * count)
    return valid.filter(pc.invert(misplaced)), refused


def _row_rows(obj: ObjectToRead, parsed: ParsedFile, valid: pa.Table, schema: pa.Schema) -> pa.Table:
    """Valid rows as `row` output rows, with their audit columns."""
    records = valid[RECORD]
    rows = {name: valid[name] for name in valid.column_names}
    rows.update({FILE_INDEX: pa.repeat(pa.scalar(obj.index, pa.int32()), valid.num_rows),
                 KIND: pa.repeat(RowKind.ROW.value, valid.num_rows),
                 SOURCE_FILE: pa.repeat(obj.key, valid.num_rows),
                 SOURCE_LINE: pa.array(parsed.line_numbers(records.to_numpy()), pa.int64())})
    if SEQUENCE not in rows:  # the file's (a `sequence_by` column gave CDC rows theirs)
        rows[SEQUENCE] = numbered(obj.prefix or "", records)
    return _conformed(rows, valid.num_rows, schema)


def unreadable(declaration: TableDeclaration, obj: ObjectToRead, error: str) -> pa.Table:
    """The `file` row of an object whose bytes could not be fetched (refused whole, nothing parsed)."""
    summary = {FILE_INDEX: pa.array([obj.index], pa.int32()), KIND: pa.array([RowKind.FILE.value]),
               SOURCE_FILE: pa.array([obj.key]), "_records": pa.array([0], pa.int64()),
               "_valid": pa.array([0], pa.int64()), "_refused": pa.array([0], pa.int64()),
               "_refusal": pa.array([f"{RefusalReason.UNREADABLE_FILE.value}: {error}"])}
    return _conformed(summary, 1, output_schema(declaration))


def _sequenced(valid: pa.Table, column: str, prefix: str) -> tuple[pa.Table, Refused]:
    """`valid` with each row's sequence from its `sequence_by` column (in the time slot of the
    sequence: core/sequence.py; the rest of the file's prefix and the record number order ties),
    and the rows whose value is NULL or negative refused (`no_sequence`)."""
    values = valid[column]
    slot = time_slot(values)
    usable = pc.fill_null(pc.is_valid(slot), False)
    refused = Refused.none()
    missing = valid.num_rows - int(pc.sum(usable.cast(pa.int64())).as_py() or 0)
    if missing:
        bad = pc.invert(usable)
        refused = Refused(valid[RECORD].filter(bad).to_numpy(), [RefusalReason.NO_SEQUENCE.value] * missing,
                          [f"{column} is empty or negative: it orders the changes (sequence_by)"] * missing)
        valid, slot = valid.filter(usable), slot.filter(usable)
    rest = numbered(prefix[TIME_DIGITS:], valid[RECORD])
    return valid.append_column(SEQUENCE, pc.binary_join_element_wise(slot, rest, "")), refused


def time_slot(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """A sequence column's values as the 23 characters of a sequence's time slot (NULL where a
    value is NULL or negative): a time as YYYYMMDDHHMMSS and nine digits of a second, a number
    zero-padded, so the slots compare as the values do."""
    kind = values.type
    if pa.types.is_integer(kind):
        positive = pc.if_else(pc.greater_equal(values, 0), values, pa.scalar(None, kind))
        return pc.utf8_lpad(pc.cast(positive, pa.string()), TIME_DIGITS, "0")
    stamps = pc.cast(values, pa.timestamp("us", tz="UTC")) if pa.types.is_date(kind) else values
    micros = pc.add(pc.multiply(pc.cast(pc.millisecond(stamps), pa.int64()), 1000),
                    pc.cast(pc.microsecond(stamps), pa.int64()))
    return pc.binary_join_element_wise(pc.strftime(stamps, "%Y%m%d%H%M%S"),
                                       pc.utf8_lpad(pc.cast(micros, pa.string()), 6, "0"), pa.scalar("000"), "")


def _refusal_rows(declaration: TableDeclaration, obj: ObjectToRead, parsed, shape: FileLayout, refused: Refused,
                  schema: pa.Schema, source: Source) -> pa.Table:
    order = np.argsort(refused.records, kind="stable")
    records = refused.records[order]
    lines = parsed.lines()
    texts = [lines.text(int(r)) for r in records]
    rows: dict[str, pa.Array] = {
        FILE_INDEX: pa.repeat(pa.scalar(obj.index, pa.int32()), len(records)),
        KIND: pa.repeat(RowKind.REFUSAL.value, len(records)),
        RECORD: pa.array(records, pa.int64()),
        SOURCE_FILE: pa.repeat(obj.key, len(records)),
        SOURCE_LINE: pa.array([lines.line_number(int(r)) for r in records], pa.int64()),
        REASON: pa.array(refused.reasons, pa.string()).take(pa.array(order)),
        DETAIL: pa.array(refused.details, pa.string()).take(pa.array(order)),
        RAW_TEXT: pa.array(texts, pa.string()),
    }
    if obj.kind is SourceKind.SNAPSHOT:  # a refused row's key, where its key fields are well formed
        rows.update(_keys_of(declaration, shape, texts, source.delimiter))
    return _conformed(rows, len(records), schema)


def _keys_of(declaration: TableDeclaration, shape: FileLayout, texts: list[str], delimiter: str) -> dict[str, pa.Array]:
    """The key columns of refused records, NULL where a key field is missing or malformed."""
    import csv

    positions = {k: shape.columns.index(k) for k in declaration.keys}
    fields = [next(csv.reader([text], delimiter=delimiter), []) for text in texts]
    strings = pa.table({k: pa.array([f[p] if p < len(f) else "" for f in fields], pa.string())
                        for k, p in positions.items()} | {RECORD: pa.array(range(len(texts)), pa.int64())})
    only_keys = declaration.model_copy(update={"columns": tuple(declaration.column(k) for k in declaration.keys)})
    valid, _ = validate(only_keys, strings, SNAPSHOT_OPERATION)
    at = pc.index_in(pa.array(range(len(texts)), pa.int64()), value_set=valid[RECORD])
    return {k: valid[k].take(at) for k in declaration.keys}


def _conformed(columns: dict, count: int, schema: pa.Schema) -> pa.Table:
    """`columns` as a table of `schema`, the columns it lacks NULL."""
    arrays = []
    for f in schema:
        value = columns.get(f.name)
        arrays.append(pa.nulls(count, f.type) if value is None else
                      (value if value.type == f.type else value.cast(f.type)))
    return pa.table(arrays, schema=schema)


# --- on the engine -------------------------------------------------------------------------------

#: Output batches of at most this many rows (Arrow IPC to the engine).
BATCH_ROWS = 1 << 16


#: Small objects (`SMALL_OBJECT_BYTES` when listed) fetched at once, a group's worth before it is
#: parsed: 912 of web_sales' day objects (80 KiB each) in 1.4 s on eight threads against 3.4 s one
#: at a time (3.8 s with boto3); with sixteen the reader read all 1,824 in 10.0-10.2 s in one
#: process, against 11.4-12.1 s with eight and 10.4-10.5 s with thirty-two.
FETCHING_THREADS = 16


@dataclass(frozen=True)
class _Fetched:
    """An object's bytes and the ETag they were read with, or why they could not be read."""

    data: bytes = b""
    etag: str = ""
    error: str | None = None


def fetched(fetch: Callable[[ObjectToRead], _Fetched],
            objects: list[ObjectToRead]) -> Iterator[tuple[ObjectToRead, _Fetched]]:
    """Each of `objects` with its bytes, in their order: small ones fetched `FETCHING_THREADS` at
    a time, a group's worth (`GROUP_BYTES` as listed) before any is parsed (fetches that wait for
    the parsing thread's GIL take longer than the parse); a large object alone, so two large ones
    are never held at once."""
    with ThreadPoolExecutor(FETCHING_THREADS) as pool:
        group: list[ObjectToRead] = []
        listed = 0
        for obj in objects:
            if obj.size > SMALL_OBJECT_BYTES:
                yield from zip(group, list(pool.map(fetch, group)))
                group, listed = [], 0
                yield obj, fetch(obj)
                continue
            group.append(obj)
            listed += obj.size
            if listed >= GROUP_BYTES:
                yield from zip(group, list(pool.map(fetch, group)))
                group, listed = [], 0
        yield from zip(group, list(pool.map(fetch, group)))


def s3_fetch(endpoint: str, bucket: str, region: str) -> Callable[[ObjectToRead], _Fetched]:
    """Fetches an object's bytes with Arrow's S3 client, which releases the GIL (boto3's requests
    cost the engine's Python 1.5 ms each); the credentials are the engine's own (its environment
    or the AWS default chain), never passed to it."""
    from pyarrow import fs

    s3 = fs.S3FileSystem(endpoint_override=endpoint, region=region)

    def fetch(obj: ObjectToRead) -> _Fetched:
        try:
            with s3.open_input_stream(f"{bucket}/{obj.key}") as stream:
                # in one read of the listed size (a read to the end takes 64 KiB at a time: 0.3 s for 13 MiB)
                data = stream.read(max(obj.size, 1))
                rest = stream.read()  # replaced by a longer object since it was listed
                if rest:
                    data += rest
                etag = stream.metadata().get("ETag", b"").decode().strip('"')
        except OSError as error:
            return _Fetched(error=str(error))
        return _Fetched(data, etag)
    return fetch


def reader(declaration: TableDeclaration, dms: DmsLayout, endpoint: str, bucket: str,
           region: str) -> Callable[[Iterable[pa.RecordBatch]], Iterable[pa.RecordBatch]]:
    """The `mapInArrow` function that reads the objects of its input batches (OBJECT_COLUMNS)."""

    def read(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fetch = s3_fetch(endpoint, bucket, region)
        small: list[tuple[ObjectToRead, bytes, str]] = []

        def read_small() -> Iterator[pa.RecordBatch]:
            for part in read_objects(declaration, dms, small):
                yield from part.to_batches(max_chunksize=BATCH_ROWS)
            small.clear()

        held = 0  # the bytes of the small objects waiting in `small`

        for batch in batches:
            objects = [ObjectToRead(row["_file"], row["key"], SourceKind(row["kind"]), row["prefix"], row["refusal"],
                                    row["size"]) for row in batch.to_pylist()]
            for obj, got in fetched(fetch, objects):
                if got.error is not None:
                    yield from unreadable(declaration, obj, got.error).to_batches()
                    continue
                if len(got.data) > SMALL_OBJECT_BYTES:
                    for part in read_object(declaration, dms, obj, got.data, got.etag):
                        yield from part.to_batches(max_chunksize=BATCH_ROWS)
                    continue
                small.append((obj, got.data, got.etag))
                held += len(got.data)
                if held >= GROUP_BYTES:
                    yield from read_small()
                    held = 0
        yield from read_small()
    return read
