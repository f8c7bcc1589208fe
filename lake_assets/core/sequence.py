"""The sequence of a change: which of two changes to one key is the newer (`SEQUENCE BY`).

Every applied row carries `_sequence`, a fixed-width string whose order is the order of
the changes it stands for:

    YYYYMMDDHHMMSSfff . part(6) . delivery(4) . row(10)

- the time of the file: the AWS DMS timestamp in its name (`20240401-090000000.csv`,
  YYYYMMDD-HHMMSSfff, or YYYYMMDD-HHMMSS), else its date-partition folders in the
  configured order (`LAKE_CDC_FOLDER_DATE_FORMAT`, e.g. `YYYY/MM/DD` or `DDMMYYYY`);
- the part: the number in the name of a file dated only by its folders (`LOAD00000002.csv`,
  `part-7.csv`), else 0. A full load with no time of its own is stamped "as of its
  arrival": the time of the newest change applied before it, with a part from
  ARRIVAL_PART up (so it follows every change of that time, and each later such snapshot
  follows the one before). Not the object's LastModified: that is the S3 server's clock,
  while file times are the source's (DMS) clock, and a snapshot uploaded today of data
  whose changes are stamped 2024 would then override every one of them;
- the delivery: 1 for the first content seen under an object key, 2 for the next
  (a corrected re-delivery under the same name), ...;
- the row: the record number in the file.

A fixed-width string compares the same way in Python, pyarrow, Sail and JVM Spark. Both
domains use it: insurance's files (insurance/pipeline.py) and TPC-DS's day objects and
corrections (tpcds/sequencing.py: a day object, like a full load, is stamped as of its
arrival; a row's number is its line).
"""

import datetime as dt
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_assets.core.errors import UsageError

NAME_STAMP = re.compile(r"(?<![0-9])([0-9]{8})-([0-9]{6})([0-9]{3})?(?![0-9])")
TOKENS = {"YYYY": r"(?P<year>[0-9]{4})", "MM": r"(?P<month>[0-9]{2})", "DD": r"(?P<day>[0-9]{2})",
          "HH": r"(?P<hour>[0-9]{2})"}
MAX_PART, MAX_DELIVERY = 10**6 - 1, 10**4 - 1
ARRIVAL_PART = 900_000  # parts from names stay below it


@dataclass(frozen=True)
class FileStamp:
    """Where a file sits in time: its timestamp (17 digits) and part number."""

    time: str
    part: int = 0

    def base(self, delivery: int = 0) -> str:
        """The sequence just before this file's first row."""
        return f"{self.time}.{self.part:06d}.{delivery:04d}.{0:010d}"

    @staticmethod
    def parse(sequence: str) -> "FileStamp":
        return FileStamp(sequence[:17], int(sequence[18:24]))


def arrival_stamp(newest_applied: str | None) -> FileStamp:
    """The stamp of a snapshot with no time of its own: just after `newest_applied`."""
    if newest_applied is None:
        return FileStamp("0" * 17, ARRIVAL_PART)
    before = FileStamp.parse(newest_applied)
    return FileStamp(before.time, max(ARRIVAL_PART, before.part + 1) if before.part < MAX_PART else MAX_PART)


def folder_pattern(date_format: str) -> re.Pattern:
    """A regex for the innermost date folders written in `date_format` (YYYY, MM, DD, HH
    with `/`, `-`, `_` or nothing between them, e.g. `YYYY/MM/DD`, `DDMMYYYY`)."""
    pattern, rest = "", date_format.strip()
    if not rest:
        raise UsageError("LAKE_CDC_FOLDER_DATE_FORMAT is empty")
    while rest:
        token = next((t for t in TOKENS if rest.startswith(t)), None)
        if token is not None:
            pattern, rest = pattern + TOKENS[token], rest[len(token):]
        elif rest[0] in "/-_":
            pattern, rest = pattern + re.escape(rest[0]), rest[1:]
        else:
            raise UsageError(f"LAKE_CDC_FOLDER_DATE_FORMAT {date_format!r}: use YYYY, MM, DD, HH and / - _")
    if "year" not in pattern or "month" not in pattern:
        raise UsageError(f"LAKE_CDC_FOLDER_DATE_FORMAT {date_format!r} needs at least YYYY and MM")
    return re.compile(f"(?:^|/){pattern}$")


def file_stamp(relative_key: str, folders: re.Pattern) -> FileStamp | None:
    """The stamp of a raw file from its key below the zone (`2024/04/01/x.csv`), or None
    when it carries no usable time."""
    folder, _, name = relative_key.rpartition("/")
    stem = name.rsplit(".", 1)[0]
    named = name_stamp(stem)
    if named is not None:
        return named
    dated = folders.search(folder)
    if dated is not None:
        fields = dated.groupdict()
        day = f"{fields['year']}{fields['month']}{fields.get('day') or '01'}"
        stamp = _time(day, f"{fields.get('hour') or '00'}0000", "000")
        numbers = re.findall(r"[0-9]+", stem)
        part = min(int(numbers[-1]), ARRIVAL_PART - 1) if numbers else 0
        if stamp is not None:
            return FileStamp(stamp, part)
    return None


def name_stamp(stem: str) -> FileStamp | None:
    """The stamp of the AWS DMS timestamp in a file's name (YYYYMMDD-HHMMSSfff or
    YYYYMMDD-HHMMSS), or None when the name holds no valid one."""
    for match in NAME_STAMP.finditer(stem):
        stamp = _time(match.group(1), match.group(2), match.group(3) or "000")
        if stamp is not None:
            return FileStamp(stamp)
    return None


def _time(day: str, clock: str, millis: str) -> str | None:
    try:
        dt.datetime.strptime(day + clock, "%Y%m%d%H%M%S")
    except ValueError:
        return None
    return day + clock + millis


def row_sequences(stamp: FileStamp, delivery: int, records: pa.Array | pa.ChunkedArray | np.ndarray) -> pa.Array:
    """The sequence of each row (by record number) of one delivery of a file.

    Built as fixed-width bytes (the prefix, then the record number in ten digits) in one
    buffer, without a string operation per row.
    """
    if delivery > MAX_DELIVERY:
        raise ValueError(f"more than {MAX_DELIVERY} deliveries of one file")
    numbers = records if isinstance(records, np.ndarray) else records.to_numpy()
    numbers = numbers.astype(np.int64)
    prefix = np.frombuffer(stamp.base(delivery)[:-10].encode(), np.uint8)
    width = len(prefix) + ROW_DIGITS
    chunks = []
    for start in range(0, max(len(numbers), 1), _CHUNK_ROWS):  # int32 offsets: bounded chunks
        part = numbers[start:start + _CHUNK_ROWS]
        text = np.empty((len(part), width), np.uint8)
        text[:, :len(prefix)] = prefix
        # 10**10 + n prints as "1" and n in ten digits: every value has the same width
        digits = pc.cast(pa.array(part + 10**ROW_DIGITS), pa.string()).buffers()[2]
        text[:, len(prefix):] = np.frombuffer(digits, np.uint8, len(part) * (ROW_DIGITS + 1)) \
            .reshape(len(part), ROW_DIGITS + 1)[:, 1:]
        offsets = np.arange(len(text) + 1, dtype=np.int32) * width
        chunks.append(pa.Array.from_buffers(pa.string(), len(text), [None, pa.py_buffer(offsets),
                                                                     pa.py_buffer(text)]))
    return pa.chunked_array(chunks, pa.string()).combine_chunks() if len(chunks) == 1 else pa.chunked_array(chunks)


ROW_DIGITS = 10
_CHUNK_ROWS = 1 << 20
