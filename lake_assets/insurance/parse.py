"""Tolerant CSV parsing: raw bytes -> string columns, plus every record that could not be parsed.

The engine's CSV reader fails a whole file on one malformed row, so raw files are parsed
here with pyarrow's multi-threaded reader and an `invalid_row_handler` that collects
rows with the wrong field count instead of failing. Nothing is dropped: every record of
the file is either a row of `ParsedFile.rows` or an entry of `ParsedFile.rejected`.

Records are numbered as pyarrow numbers them: the first record of the file (the header,
when there is one) is 1, blank lines are not records.
"""

import io
import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from lake_assets.insurance.contract import Reason

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
    _lines: "RecordLines | None" = field(default=None, repr=False)

    @property
    def record_count(self) -> int:
        """Data records in the file (the header is not one)."""
        return self.rows.num_rows + len(self.rejected)

    def line_numbers(self, records: np.ndarray) -> np.ndarray:
        """Line on which each of `records` starts.

        Without quotes or blank lines a record is a line, so no scan is needed.
        """
        if b'"' not in self.data and b"\n\n" not in self.data and b"\n\r\n" not in self.data \
                and b"\r\r" not in self.data and not self.data.startswith((b"\n", b"\r")):
            return records.astype(np.int64)
        return self.lines().line_numbers(records)

    def lines(self) -> "RecordLines":
        if self._lines is None:
            self._lines = RecordLines(self.data, records=self.record_count + (self.header is not None))
        return self._lines


def parse_csv(key: str, etag: str, data: bytes, column_names: list[str], has_header: bool) -> ParsedFile:
    """Parse `data` as CSV with `column_names`, all values as strings."""
    try:
        table, bad = _read(data, column_names, use_threads=True)
        if bad:  # dirty file: parse again on one thread, which numbers the bad records
            table, bad = _read(data, column_names, use_threads=False)
    except (pa.ArrowInvalid, UnicodeDecodeError) as error:
        return _unreadable(key, etag, data, str(error), column_names, has_header)

    bad_numbers = np.array([number for number, _ in bad], dtype=np.int64)
    total = table.num_rows + len(bad)
    good_numbers = np.setdiff1d(np.arange(1, total + 1, dtype=np.int64), bad_numbers, assume_unique=True)
    table = table.append_column(RECORD, pa.array(good_numbers))
    rejected = Rejected(bad_numbers, [Reason.WRONG_FIELD_COUNT.value] * len(bad), [detail for _, detail in bad])

    header = None
    if has_header:
        if table.num_rows and table[RECORD][0].as_py() == 1:
            header = [table[c][0].as_py() for c in column_names]
            table = table.slice(1)
        else:  # the first record had the wrong field count: it is still the header
            header = []
            keep = rejected.records != 1
            rejected = Rejected(rejected.records[keep], [r for r, k in zip(rejected.reasons, keep) if k],
                                [d for d, k in zip(rejected.details, keep) if k])
    return ParsedFile(key, etag, data, table, rejected, header)


def _read(data: bytes, column_names: list[str], use_threads: bool) -> tuple[pa.Table, list[tuple[int, str]]]:
    bad: list[tuple[int, str]] = []
    expected = len(column_names)

    def collect(row: pacsv.InvalidRow) -> str:
        bad.append((row.number or 0, f"expected {expected} fields, found {row.actual_columns}"))
        return "skip"

    table = pacsv.read_csv(
        io.BytesIO(data),
        read_options=pacsv.ReadOptions(column_names=column_names, use_threads=use_threads,
                                       block_size=16 << 20),
        parse_options=pacsv.ParseOptions(invalid_row_handler=collect, newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in column_names},
                                             strings_can_be_null=False, quoted_strings_can_be_null=False),
    )
    return table, bad


def _unreadable(key: str, etag: str, data: bytes, error: str, column_names: list[str],
                has_header: bool) -> ParsedFile:
    """A file the CSV reader refuses (e.g. not UTF-8): every non-blank line is rejected."""
    lines = RecordLines(data, quoted=False)
    numbers = np.arange(1, lines.count + 1, dtype=np.int64)
    if has_header and len(numbers):
        numbers = numbers[1:]
    detail = f"the file is not readable as CSV: {error}"[:500]
    rejected = Rejected(numbers, [Reason.UNREADABLE_FILE.value] * len(numbers), [detail] * len(numbers))
    empty = pa.table({**{c: pa.array([], pa.string()) for c in column_names}, RECORD: pa.array([], pa.int64())})
    return ParsedFile(key, etag, data, empty, rejected, header=[] if has_header else None, _lines=lines)


class RecordLines:
    """Where each CSV record of a file starts: its line number and its raw text.

    Computed only for files with rejected rows. Newlines inside quoted values do not end a
    record (an odd number of quote characters before a newline means we are inside one).
    That fast scan is wrong for a quote inside an unquoted value (`5" pipe`) or lone CR line
    ends; when it disagrees with the parser's count of `records`, an exact scan is used.
    """

    def __init__(self, data: bytes, quoted: bool = True, records: int | None = None) -> None:
        self._data = data
        if self._vectorised(data, quoted) != records and records is not None and quoted:
            self._scan(data)

    def _vectorised(self, data: bytes, quoted: bool) -> int:
        buffer = np.frombuffer(data, dtype=np.uint8)
        newlines = np.flatnonzero(buffer == 10)
        ends = newlines
        if quoted and b'"' in data:
            quotes = np.flatnonzero(buffer == 34)
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

    def _scan(self, data: bytes) -> None:
        """Record boundaries the way the CSV reader finds them: a quote opens a quoted value
        only at the start of a field, `""` inside one is a quote, and \\n, \\r\\n or \\r end a line."""
        starts, stops, lines = [], [], []
        line, start, field_start, quoted, skip = 1, 0, 0, False, -1
        for token in re.finditer(rb'"|,|\r\n|\n|\r', data):
            at, text = token.start(), token.group()
            if at == skip:
                continue
            if quoted:
                if text == b'"':
                    if data[at + 1:at + 2] == b'"':
                        skip = at + 1
                    else:
                        quoted = False
                elif text != b",":
                    line += 1
            elif text == b'"':
                quoted = at == field_start
            elif text == b",":
                field_start = at + 1
            else:
                if at > start:
                    starts.append(start), stops.append(at), lines.append(line)
                line, start, field_start = line + 1, token.end(), token.end()
        if len(data) > start:
            starts.append(start), stops.append(len(data)), lines.append(line)
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
