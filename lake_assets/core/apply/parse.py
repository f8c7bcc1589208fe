"""Tolerant CSV parsing: raw bytes -> string columns, plus every record that could not be parsed.
Fields are separated by `,` or by the source's declared delimiter (`|`, `;`, a tab, ...).

The engine's CSV reader fails a whole file on one malformed row, so raw files are parsed
here, by pyarrow's multi-threaded reader unless the file's quoting is broken; then it is
parsed again record by record with Python's csv module (`_read_dirty`, slower), which never
gives up on the rest of the file:

- a byte that is not UTF-8 (a latin-1 `é`) or a NUL byte (binary data) rejects only the
  record it is in, as `bad_encoding` (such bytes are replaced by `?` before parsing, which
  keeps every offset, and the records holding them are rejected afterwards);
- a quote that opens a value and never closes (pyarrow and every CSV reader would read the
  rest of the file into that value) rejects only the line it opened on, as
  `unterminated_quote`, and parsing resumes on the next line;
- a record with the wrong number of fields is rejected as `wrong_field_count`.

Nothing is dropped: every record of the file is either a row of `ParsedFile.rows` or an
entry of `ParsedFile.rejected`. Records are numbered from 1 in file order (the header, when
there is one, is record 1); blank lines are not records.
"""

import collections
import csv
import io
import re
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from lake_assets.core.declaration import RefusalReason as Reason

RECORD = "_record"


@dataclass(frozen=True)
class Rejected:
    """Records of one file that were not applied, with why."""

    records: np.ndarray  # record numbers (int64)
    reasons: list[str]
    details: list[str]

    @staticmethod
    def empty() -> "Rejected":
        return Rejected(np.empty(0, np.int64), [], [])

    def __len__(self) -> int:
        return len(self.reasons)

    def __add__(self, other: "Rejected") -> "Rejected":
        return Rejected(np.concatenate([self.records, other.records]),
                        self.reasons + other.reasons, self.details + other.details)


@dataclass
class ParsedFile:
    key: str
    etag: str
    data: bytes
    rows: pa.Table  # all-string columns plus RECORD
    rejected: Rejected
    header: list[str] | None = None
    delimiter: str = ","
    _lines: "RecordLines | None" = field(default=None, repr=False)
    _per_line: bool | None = field(default=None, repr=False)  # every line is one record
    _released_rows: int | None = field(default=None, repr=False)  # rows there were before `release`

    @property
    def record_count(self) -> int:
        """Data records in the file (the header is not one)."""
        rows = self.rows.num_rows if self._released_rows is None else self._released_rows
        return rows + len(self.rejected)

    def line_numbers(self, records: np.ndarray) -> np.ndarray:
        """Line on which each of `records` starts.

        When the file has as many lines as records, every line is one record (a blank line
        or a record spanning lines would make more lines than records), so no scan is needed.
        """
        if self._lines is None and self._one_record_per_line():
            return records.astype(np.int64)
        return self.lines().line_numbers(records)

    def release(self) -> None:
        """Once the rows are validated without a rejection: drop the raw bytes and the
        string rows. No record's text will be needed (only quarantined records show
        theirs), line numbers are worked out now, and a big clean file then costs no
        memory for its bytes or for the strings its typed columns were cast from."""
        if len(self.rejected) or self._released_rows is not None:
            return
        if not self._one_record_per_line():
            self.lines()._data = b""
        self.data = b""
        self._released_rows = self.rows.num_rows
        self.rows = self.rows.schema.empty_table()

    def _one_record_per_line(self) -> bool:
        if self._per_line is None:
            self._per_line = self._counts_one_record_per_line()
        return self._per_line

    def _counts_one_record_per_line(self) -> bool:
        data = self.data
        if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):  # a lone CR ends a line too: scan
            return False
        lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        return lines == self.record_count + (self.header is not None)

    def lines(self) -> "RecordLines":
        if self._lines is None:
            self._lines = RecordLines(self.data, records=self.record_count + (self.header is not None),
                                      delimiter=self.delimiter)
        return self._lines


def parse_csv(key: str, etag: str, data: bytes, column_names: list[str], has_header: bool,
              delimiter: str = ",") -> ParsedFile:
    """Parse `data` as CSV with `column_names` and fields separated by `delimiter`, all values as strings."""
    invalid = _invalid_utf8(data)
    text = _as_text(data, invalid)  # same length and line structure as `data`, valid UTF-8
    lines = None
    table, bad = _read_clean(text, column_names, delimiter)
    if table is None:
        table, bad, lines = _read_dirty(text, column_names, delimiter)

    bad_numbers = np.array([number for number, _, _ in bad], dtype=np.int64)
    total = table.num_rows + len(bad)
    good_numbers = np.setdiff1d(np.arange(1, total + 1, dtype=np.int64), bad_numbers, assume_unique=True)
    table = table.append_column(RECORD, pa.array(good_numbers))
    rejected = Rejected(bad_numbers, [reason for _, reason, _ in bad], [detail for _, _, detail in bad])
    if invalid or b"\0" in data:
        if lines is None:
            lines = RecordLines(text, records=total, delimiter=delimiter)
        lines._data = data  # raw text shows the original bytes (U+FFFD for the invalid ones)
        table, rejected = _reject_non_text(data, invalid, lines, table, rejected)

    header = None
    if has_header:
        if table.num_rows and table[RECORD][0].as_py() == 1:
            header = [table[c][0].as_py() for c in column_names]
            table = table.slice(1)
        else:  # the first record was rejected: it is still the header
            header = []
            keep = rejected.records != 1
            rejected = Rejected(rejected.records[keep], [r for r, k in zip(rejected.reasons, keep) if k],
                                [d for d, k in zip(rejected.details, keep) if k])
    return ParsedFile(key, etag, data, table, rejected, header, delimiter, _lines=lines)


def _read_clean(data: bytes, column_names: list[str],
                delimiter: str) -> tuple[pa.Table | None, list[tuple[int, str, str]]]:
    """pyarrow's reader, if the file is clean enough for it; (None, []) sends it to `_read_dirty`.

    A file with only single-line records of the wrong field count stays here (re-read on one
    thread, which numbers them). A rejected record spanning lines, or a last record whose
    value runs over a line break (a quote left open at the end), go to `_read_dirty`.
    """
    try:
        table, bad = _read(data, column_names, delimiter, use_threads=True)
        if bad:  # dirty file: parse again on one thread, which numbers the bad records
            table, bad = _read(data, column_names, delimiter, use_threads=False)
    except pa.ArrowInvalid:
        return None, []
    if any(_LINE_BREAK.search(text) for _, _, text in bad):
        return None, []
    if table.num_rows and any(_LINE_BREAK.search(table[c][-1].as_py() or "") for c in column_names):
        return None, []
    return table, [(number, Reason.WRONG_FIELD_COUNT.value, detail) for number, detail, _ in bad]


def _read(data: bytes, column_names: list[str], delimiter: str,
          use_threads: bool) -> tuple[pa.Table, list[tuple[int, str, str]]]:
    """pyarrow's reader; rows with the wrong field count are collected as (number, detail, text)."""
    bad: list[tuple[int, str, str]] = []
    expected = len(column_names)

    def collect(row: pacsv.InvalidRow) -> str:
        bad.append((row.number or 0, f"expected {expected} fields, found {row.actual_columns}", row.text))
        return "skip"

    table = pacsv.read_csv(
        io.BytesIO(data),
        read_options=pacsv.ReadOptions(column_names=column_names, use_threads=use_threads,
                                       block_size=16 << 20),
        parse_options=pacsv.ParseOptions(delimiter=delimiter, invalid_row_handler=collect, newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in column_names},
                                             strings_can_be_null=False, quoted_strings_can_be_null=False),
    )
    return table, bad


_LINE_BREAK = re.compile(r"[\r\n]")
_LINE_END = re.compile(rb"\r\n|\n|\r")  # what ends a line for pyarrow and Python's csv
_REPLACEMENT = ord("?")  # stands in for a byte that is not UTF-8; never a delimiter (declaration.py refuses it)


def _invalid_utf8(data: bytes) -> list[tuple[int, int]]:
    """(start, end) byte ranges of `data` that are not UTF-8; [] for a UTF-8 file."""
    if not data or int(np.frombuffer(data, np.uint8).max()) < 0x80:
        return []  # ASCII: nothing to decode
    ranges: list[tuple[int, int]] = []
    at = 0
    while True:
        try:
            data[at:].decode("utf-8")
            return ranges
        except UnicodeDecodeError as error:
            ranges.append((at + error.start, at + error.end))
            at += error.end


def _as_text(data: bytes, invalid: list[tuple[int, int]]) -> bytes:
    """`data` with each byte of the `invalid` ranges replaced by `?` (offsets are kept)."""
    if not invalid:
        return data
    clean = bytearray(data)
    for start, end in invalid:
        clean[start:end] = bytes([_REPLACEMENT]) * (end - start)
    return bytes(clean)


def _reject_non_text(data: bytes, invalid: list[tuple[int, int]], lines: "RecordLines", table: pa.Table,
                     rejected: Rejected) -> tuple[pa.Table, Rejected]:
    """Reject, as `bad_encoding`, every record holding a byte that is not UTF-8 or a NUL byte."""
    buffer = np.frombuffer(data, np.uint8)
    offsets = np.concatenate([np.array([start for start, _ in invalid], np.int64), np.flatnonzero(buffer == 0)])
    found: dict[int, list[int]] = {}
    for offset, index in zip(offsets.tolist(), (np.searchsorted(lines._starts, offsets, "right") - 1).tolist()):
        if index >= 0 and offset < lines._stops[index]:
            found.setdefault(index + 1, []).append(offset)
    if not found:
        return table, rejected
    details = {}
    for record, at in found.items():
        first, start = min(at), int(lines._starts[record - 1])
        what = "binary data, not text: NUL byte" if data[first] == 0 else f"not UTF-8: byte 0x{data[first]:02X}"
        details[record] = f"{what} at offset {first - start} of the record" + \
            (f" (and {len(at) - 1} more)" if len(at) > 1 else "")
    keep = [r not in details for r in rejected.records.tolist()]
    records = np.concatenate([rejected.records[keep], np.array(sorted(details), np.int64)])
    reasons = [r for r, k in zip(rejected.reasons, keep) if k] + [Reason.BAD_ENCODING.value] * len(details)
    texts = [d for d, k in zip(rejected.details, keep) if k] + [details[r] for r in sorted(details)]
    order = np.argsort(records, kind="stable")
    rejected = Rejected(records[order], [reasons[i] for i in order], [texts[i] for i in order])
    good = pc.invert(pc.is_in(table[RECORD], value_set=pa.array(sorted(details), pa.int64())))
    return table.filter(good), rejected


def _read_dirty(text: bytes, column_names: list[str],
                delimiter: str) -> tuple[pa.Table, list[tuple[int, str, str]], "RecordLines"]:
    """Record by record with Python's csv reader, recovering after every bad record."""
    clean = text
    bounds = [0, *(m.end() for m in _LINE_END.finditer(clean))]
    if bounds[-1] != len(clean):
        bounds.append(len(clean))  # a last line without a line end
    line_starts, line_ends = bounds[:-1], bounds[1:]
    lines = [clean[s:e].decode("utf-8") for s, e in zip(line_starts, line_ends)]
    spans = _records(lines, len(column_names), delimiter)

    rows: list[list[str]] = []
    bad: list[tuple[int, str, str]] = []
    for number, (_, _, fields, reason, detail) in enumerate(spans, start=1):
        if fields is None:
            bad.append((number, reason, detail))
        else:
            rows.append(fields)
    columns = list(zip(*rows)) if rows else [() for _ in column_names]
    table = pa.table({name: pa.array(values, pa.string()) for name, values in zip(column_names, columns)})
    firsts = np.array([first for first, _, _, _, _ in spans], np.int64)
    lasts = np.array([last for _, last, _, _, _ in spans], np.int64)
    ends = np.array(line_ends, np.int64)[lasts] if len(lasts) else lasts
    tails = np.array([len(line) - len(line.rstrip("\r\n")) for line in lines], np.int64)  # line end bytes
    stops = ends - (tails[lasts] if len(lasts) else lasts)
    starts = np.array(line_starts, np.int64)[firsts] if len(firsts) else firsts
    return table, bad, RecordLines.from_spans(text, starts.tolist(), stops.tolist(), (firsts + 1).tolist(), delimiter)


def _records(lines: list[str], expected: int, delimiter: str) -> list[tuple[int, int, list[str] | None, str, str]]:
    """(first line, last line, fields or None, reason, detail) of each record, lines 0-based.

    A record that spans lines and has the wrong field count, or runs to the end of the file
    inside a quoted value, began with a quote that never closed -- if the lines after its
    first hold a well-formed record, that is: then only its first line is rejected
    (`unterminated_quote`) and reading starts again on the next line.
    """
    records: list[tuple[int, int, list[str] | None, str, str]] = []
    at = 0
    while at < len(lines):
        reader = csv.reader(lines[at:], delimiter=delimiter)
        consumed, restart = 0, None
        while restart is None:
            first = at + consumed
            try:
                fields = next(reader)
            except StopIteration:
                break
            except csv.Error as error:  # a value larger than the csv module allows: a runaway quote
                reason = Reason.UNTERMINATED_QUOTE if _ends_inside_quotes(lines[first:first + 1], delimiter) \
                    else Reason.WRONG_FIELD_COUNT
                records.append((first, first, None, reason.value, f"not CSV: {error}"))
                restart = first + 1
                break
            consumed = reader.line_num
            last = at + consumed - 1
            if not fields:
                continue  # a blank line
            runaway = last > first and (len(fields) != expected or
                                        (last == len(lines) - 1 and _ends_inside_quotes(lines[first:last + 1],
                                                                                        delimiter)))
            if runaway and _holds_a_record(lines[first + 1:last + 1], expected, delimiter):
                records.append((first, first, None, Reason.UNTERMINATED_QUOTE.value,
                                f"a quote opened on this line is not closed (it ran to line {last + 1}); "
                                f"reading resumed on the next line"))
                restart = first + 1
            elif len(fields) != expected:
                records.append((first, last, None, Reason.WRONG_FIELD_COUNT.value,
                                f"expected {expected} fields, found {len(fields)}"))
            else:
                records.append((first, last, fields, "", ""))
        if restart is None:
            break
        at = restart
    return records


def _holds_a_record(lines: list[str], expected: int, delimiter: str) -> bool:
    """True if `lines`, read on their own, contain a record with the expected field count."""
    try:
        return any(len(fields) == expected for fields in csv.reader(lines, delimiter=delimiter))
    except csv.Error:
        return False


def _ends_inside_quotes(lines: list[str], delimiter: str) -> bool:
    """True if a quoted value is still open at the end of `lines` (the CSV quoting rules:
    a quote opens a value only at the start of a field; `""` inside one is a quote)."""
    quoted, field_start, skip = False, 0, -1
    text = "".join(lines)
    for token in re.finditer(f'"|{re.escape(delimiter)}|\r\n|\n|\r', text):
        at, char = token.start(), token.group()
        if at == skip:
            continue
        if quoted:
            if char == '"':
                if text[at + 1:at + 2] == '"':
                    skip = at + 1
                else:
                    quoted = False
        elif char == '"':
            quoted = at == field_start
        else:
            field_start = token.end()
    return quoted


class RecordLines:
    """Where each CSV record of a file starts: its line number and its raw text.

    Computed only for files with rejected rows. Newlines inside quoted values do not end a
    record (an odd number of quote characters before a newline means we are inside one).
    That fast scan is wrong for a quote inside an unquoted value (`5" pipe`) or lone CR line
    ends; when it disagrees with the parser's count of `records`, an exact scan is used.
    """

    def __init__(self, data: bytes, quoted: bool = True, records: int | None = None, delimiter: str = ",") -> None:
        self._data = data
        self._delimiter = delimiter
        if self._vectorised(data, quoted) != records and records is not None and quoted:
            self._scan(data)

    @classmethod
    def from_spans(cls, data: bytes, starts: list[int], stops: list[int], lines: list[int],
                   delimiter: str = ",") -> "RecordLines":
        """Record boundaries already known (byte offsets, first line of each record)."""
        spans = cls.__new__(cls)
        spans._data, spans._delimiter = data, delimiter
        spans._starts, spans._stops = np.array(starts, np.int64), np.array(stops, np.int64)
        spans._line_of_start = np.array(lines, np.int64)
        return spans

    def _vectorised(self, data: bytes, quoted: bool) -> int:
        buffer = np.frombuffer(data, dtype=np.uint8)
        newlines = np.flatnonzero(buffer == 10)
        ends = newlines
        if quoted and b'"' in data:
            quotes = self._structural_quotes(buffer, ord(self._delimiter))
            ends = newlines[np.searchsorted(quotes, newlines) % 2 == 0]
        starts = np.concatenate([[0], ends + 1])
        stops = np.concatenate([ends, [len(data)]])
        length = stops - starts
        first = buffer[np.minimum(starts, max(len(buffer) - 1, 0))] if len(buffer) else starts.astype(np.uint8)
        blank = (length == 0) | ((length == 1) & (first == 13))
        self._starts = starts[~blank]
        self._stops = stops[~blank]
        self._line_of_start = np.searchsorted(newlines, self._starts) + 1
        return len(self._starts)

    @staticmethod
    def _structural_quotes(buffer: np.ndarray, delimiter: int) -> np.ndarray:
        """Quotes that can open or close a value: next to a delimiter, a line end, the file's
        ends or another quote. A quote inside an unquoted value (`5" pipe`) is a literal."""
        quotes = np.flatnonzero(buffer == 34)
        edges = np.array([delimiter, 10, 13, 34], np.uint8)
        before = np.isin(buffer[np.maximum(quotes - 1, 0)], edges) | (quotes == 0)
        after = np.isin(buffer[np.minimum(quotes + 1, len(buffer) - 1)], edges) | (quotes == len(buffer) - 1)
        return quotes[before | after]

    def _scan(self, data: bytes) -> None:
        """Record boundaries the way the CSV reader finds them: a quote opens a quoted value
        only at the start of a field, `""` inside one is a quote, and \\n, \\r\\n or \\r end a line."""
        starts, stops, lines = [], [], []
        line, start, field_start, quoted, skip = 1, 0, 0, False, -1
        first_line = 1  # the line the current record started on
        separator = self._delimiter.encode()
        for token in re.finditer(b'"|' + re.escape(separator) + rb'|\r\n|\n|\r', data):
            at, text = token.start(), token.group()
            if at == skip:
                continue
            if quoted:
                if text == b'"':
                    if data[at + 1:at + 2] == b'"':
                        skip = at + 1
                    else:
                        quoted = False
                elif text != separator:
                    line += 1
            elif text == b'"':
                quoted = at == field_start
            elif text == separator:
                field_start = at + 1
            else:
                if at > start:
                    starts.append(start)
                    stops.append(at)
                    lines.append(first_line)
                line, start, field_start = line + 1, token.end(), token.end()
                first_line = line
        if len(data) > start:
            starts.append(start)
            stops.append(len(data))
            lines.append(first_line)
        self._starts, self._stops = np.array(starts, np.int64), np.array(stops, np.int64)
        self._line_of_start = np.array(lines, np.int64)

    @property
    def count(self) -> int:
        return len(self._starts)

    def line_numbers(self, records: np.ndarray) -> np.ndarray:
        return self._line_of_start[records - 1]

    def line_number(self, record: int) -> int:
        return int(self._line_of_start[record - 1])

    def text(self, record: int) -> str:
        raw = self._data[self._starts[record - 1]:self._stops[record - 1]]
        return raw.rstrip(b"\r").decode("utf-8", errors="replace")


@dataclass(frozen=True)
class FileShape:
    """What a file's first records say about its layout (insurance/layout.py decides it)."""

    header: list[str]  # the first record's fields, trimmed and lower-cased (a header, if it is one)
    fields: int  # the most common field count among the first records
    records: tuple[tuple[str, ...], ...] = ()  # the first records as read (the first one too)


SHAPE_SAMPLE_BYTES = 1 << 16
SHAPE_SAMPLE_RECORDS = 200
#: The sample grows (x4) until it holds this many complete records, the whole file, or ...
SHAPE_MIN_RECORDS = 10
#: ... this many bytes (a file whose first records are larger still is judged by what is complete).
SHAPE_MAX_BYTES = 1 << 24


def file_shape(data: bytes, declared: Collection[int] = (), delimiter: str = ",") -> FileShape:
    """The layout of a file from its first complete records: at least `SHAPE_MIN_RECORDS` of
    them (fewer if the file has fewer), read from a 64 KiB sample that grows while it holds
    fewer, up to `SHAPE_MAX_BYTES`; the last record of a sample that cuts the file is never
    counted (it may be cut). A stray short or long record among them does not decide it (the
    most common count does, a tie going to a `declared` count, so a short record beside one
    good one does not refuse the file)."""
    size = SHAPE_SAMPLE_BYTES
    while True:
        cut = len(data) > size
        records = _sample_records(data[:size], delimiter)
        if cut:
            records = records[:-1]
        if not cut or len(records) >= SHAPE_MIN_RECORDS or size >= SHAPE_MAX_BYTES:
            break
        size *= 4
    if not records:
        return FileShape([], 0)
    counts = collections.Counter(len(r) for r in records)
    fields = max(counts, key=lambda n: (counts[n], n in declared))
    return FileShape([f.strip().lower() for f in records[0]], fields, tuple(tuple(r) for r in records))


def _sample_records(sample: bytes, delimiter: str) -> list[list[str]]:
    """The non-empty records of `sample` (at most SHAPE_SAMPLE_RECORDS + 1); broken quoting ends it.
    Fields may be as long as the sample (the csv module's own limit, 128 KiB, is lifted meanwhile)."""
    text = sample.decode("utf-8", errors="replace").replace("\0", "")
    records = []
    limit = csv.field_size_limit(max(len(text), csv.field_size_limit()))
    try:
        for record in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter):
            if record:
                records.append(record)
            if len(records) > SHAPE_SAMPLE_RECORDS:
                break
    except csv.Error:  # broken quoting: what was read so far decides
        pass
    finally:
        csv.field_size_limit(limit)
    return records
