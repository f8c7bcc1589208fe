"""AWS DMS's Amazon S3 target: the settings a table's raw files were written with, and the
facts of DMS's CSV layout the lake reads them by.

The reference is DMS's user guide, "Using Amazon S3 as a target for AWS Database Migration
Service" (and its S3Settings API reference):

- full-load files are named with a hexadecimal counter (`LOAD00000001.csv` ...
  `LOAD00000009.csv`, `LOAD0000000A.csv`, ... `LOAD00000010.csv`), parts of one load in one
  folder; a parallel load of a source without partitions prefixes the segment
  (`SEGMENT1_LOAD00000001.csv`). CDC files are named with a timestamp (`20141029-1134010000.csv`:
  YYYYMMDD-HHMMSS and digits of a second). `PreserveTransactions` writes every table's
  changes into `CDC_TXN-<timestamp>.csv` files instead (operation, table, schema, fields);
- `AddColumnName` (default false) writes a header line of column names (the operation's is
  `Op`);
- a CDC record's first field is its operation `I`, `U` or `D`. `IncludeOpForFullLoad`
  (default false) writes `I` first in every full-load record too; with `CdcInsertsOnly` or
  `CdcInsertsAndUpdates` and `IncludeOpForFullLoad` false, CDC records may come without it
  (the guide's two tables disagree for `CdcInsertsAndUpdates`: the lake reads what the file
  holds);
- `TimestampColumnName` (default blank: no column) adds a STRING column, `yyyy-MM-dd
  HH:mm:ss.SSSSSS`: the commit time of the change for CDC, the time of the transfer for a
  full load; with `AddColumnName` the header names it. The guide shows no record with it;
  its release notes fix "column names shifted by one position when AddColumnName was true
  and TimestampColumnName was empty": the column stands before the source's columns (after
  the operation). The lake reads it there, or wherever a header names it;
- `DatePartitionEnabled` puts files in date folders, `DatePartitionSequence` (default
  `YYYYMMDD`) and `DatePartitionDelimiter` (default `SLASH`) say how they are written;
- `CsvNullValue` is what a NULL is written as (by default an empty field); `CsvDelimiter`
  is `,` unless a source declares its `delimiter`; `CsvRowDelimiter` `\\n`, `Rfc4180` quoting,
  `CompressionType` NONE and `DataFormat` csv are the defaults the lake reads (a `.csv.gz` or
  `.parquet` object is not a `.csv` file: ignored, core/raw_zone.py).
"""

import re
from dataclasses import dataclass

#: A value of DMS's TimestampColumnName column (microseconds by default; fewer digits when the
#: source's commit times are coarser).
TIMESTAMP_VALUE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?")
#: What the header calls the operation field.
OPERATION_HEADER = "op"
#: DMS's transaction files (`PreserveTransactions` with `CdcPath`): every table's changes in one file.
TRANSACTION_FILE = re.compile(r"CDC_TXN-.*", re.IGNORECASE)


@dataclass(frozen=True)
class DmsLayout:
    """The settings of the DMS endpoint writing one table's raw files that its files do not
    tell (the rest -- header, operation field, timestamp column -- each file says for itself).
    Defaults are DMS's defaults, which the sample data in `data/` follows."""

    #: `DatePartitionSequence` and `DatePartitionDelimiter` as a folder pattern: YYYYMMDD with
    #: SLASH is `YYYY/MM/DD`, DDMMYYYY with DASH `DD-MM-YYYY`, YYYYMMDDHH with NONE `YYYYMMDDHH`.
    folder_date_format: str = "YYYY/MM/DD"
    #: `TimestampColumnName`: the name a header gives the column (blank: recognised by its
    #: place before the source's columns and its values).
    timestamp_column: str = ""
    #: `CsvNullValue`: a field holding exactly this is NULL (blank: DMS's default, an empty field).
    csv_null_value: str = ""


def is_timestamp(value: str) -> bool:
    """True if `value` is a value of DMS's TimestampColumnName column."""
    return TIMESTAMP_VALUE.fullmatch(value.strip()) is not None


def is_operation(value: str) -> bool:
    """True if `value` is the operation field DMS writes first (`I`, `U`, `D`, any case), or a
    single letter in its place (an unknown operation, quarantined row by row)."""
    value = value.strip()
    return len(value) == 1 and value.isalpha()
