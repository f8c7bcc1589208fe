"""The insurance policy contract: columns, types and the rules a raw row must pass.

Columns and types follow the seed's Glue script. A row that breaks a rule is not applied;
it goes to `insurance_quarantine` with one of the `Reason` codes below.
"""

from enum import StrEnum

import pyarrow as pa

# The quarantine columns are every domain's: see core/quarantine.py.
from lake_assets.core.quarantine import QUARANTINE_COLUMNS, QUARANTINE_SCHEMA  # noqa: F401

TABLE = "insurance"
QUARANTINE_TABLE = "insurance_quarantine"
KEY = "policy_id"

#: The curated columns, in order, as (name, Arrow type, Spark SQL type).
DATA_COLUMNS: list[tuple[str, pa.DataType, str]] = [
    ("policy_id", pa.int32(), "INT"),
    ("expiry_date", pa.date32(), "DATE"),
    ("location_name", pa.string(), "STRING"),
    ("state_code", pa.string(), "STRING"),
    ("region_name", pa.string(), "STRING"),
    ("insured_value", pa.int32(), "INT"),
    ("business_type", pa.string(), "STRING"),
    ("earthquake_coverage", pa.string(), "STRING"),
    ("flood_coverage", pa.string(), "STRING"),
]
DATA_COLUMN_NAMES = [name for name, _, _ in DATA_COLUMNS]
FLAG_COLUMNS = ("earthquake_coverage", "flood_coverage")
INTEGER_COLUMNS = ("policy_id", "insured_value")

#: Audit columns kept on every curated row (like seed 002's `last_updated`).
AUDIT_COLUMNS: list[tuple[str, pa.DataType, str]] = [
    ("_operation", pa.string(), "STRING"),      # I, U (CDC) or L (full load)
    ("_source_file", pa.string(), "STRING"),    # object key the row came from
    ("_source_line", pa.int64(), "BIGINT"),     # line in that object
    ("_applied_at", pa.timestamp("us", tz="UTC"), "TIMESTAMP"),
]
TABLE_COLUMNS = DATA_COLUMNS + AUDIT_COLUMNS
TABLE_SCHEMA = pa.schema([(name, arrow_type) for name, arrow_type, _ in TABLE_COLUMNS])

#: CDC files: no header, the operation first, then the data columns.
CDC_COLUMN_NAMES = ["op", *DATA_COLUMN_NAMES]
OPERATIONS = ("I", "U", "D")
FULL_LOAD_OPERATION = "L"


class Reason(StrEnum):
    """Why a raw row was quarantined."""

    WRONG_FIELD_COUNT = "wrong_field_count"
    EMPTY_KEY = "empty_key"
    BAD_INTEGER = "bad_integer"
    BAD_DATE = "bad_date"
    BAD_FLAG = "bad_flag"
    UNKNOWN_OPERATION = "unknown_operation"
    BAD_HEADER = "bad_header"
    UNREADABLE_FILE = "unreadable_file"
    LATE_FILE = "late_file"
