"""The insurance policy contract: columns, types and the rules a raw row must pass.

Columns and types follow the seed's Glue script. A row that breaks a rule is not applied;
it goes to `insurance_quarantine` with one of the `Reason` codes below.
"""

from dataclasses import dataclass
from enum import StrEnum

import pyarrow as pa

# The quarantine columns are every domain's: see core/quarantine.py.
from lake_assets.core.quarantine import QUARANTINE_COLUMNS, QUARANTINE_SCHEMA  # noqa: F401

TABLE = "insurance"
QUARANTINE_TABLE = "insurance_quarantine"
KEY = "policy_id"

@dataclass(frozen=True)
class Column:
    name: str
    arrow_type: pa.DataType
    sql_type: str  # Spark SQL type
    description: str


@dataclass(frozen=True)
class Contract:
    """One version of the policy contract: the data columns a raw file of this version
    carries, in order (CDC files lead with the operation). A new version appends columns,
    as AWS DMS appends a column added at the source; it never drops or retypes one."""

    version: int
    columns: tuple[Column, ...]
    change: str  # what this version changed, for `lake history` readers and the README

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def cdc_names(self) -> list[str]:
        return ["op", *self.names]


#: v1 follows the seed's Glue script; descriptions follow the seed's column list.
V1 = Contract(1, (
    Column("policy_id", pa.int32(), "INT", "Policy number: the key, unique and never null"),
    Column("expiry_date", pa.date32(), "DATE", "Date that the policy expires"),
    Column("location_name", pa.string(), "STRING", "Location type (Urban or Rural)"),
    Column("state_code", pa.string(), "STRING", "State where the property is located"),
    Column("region_name", pa.string(), "STRING", "Geographic region where the property is located"),
    Column("insured_value", pa.int32(), "INT", "Property value"),
    Column("business_type", pa.string(), "STRING", "Business use of the property, such as Farming or Retail"),
    Column("earthquake_coverage", pa.string(), "STRING", "Is earthquake coverage included (Y or N)"),
    Column("flood_coverage", pa.string(), "STRING", "Is flood coverage included (Y or N)"),
), "the seed's policy columns")
#: v2 adds the seed's optional `is_flagged` (schema evolution, seed 1): rows written
#: before it, and files of v1's shape, read it as NULL.
V2 = Contract(2, V1.columns + (
    Column("is_flagged", pa.bool_(), "BOOLEAN", "Flagged for review (true/false); NULL for rows from before v2"),
), "adds the nullable is_flagged")

#: Every declared version, oldest first. Declaring a version here is how the table evolves:
#: the next run adds its columns to the table (one schema-change commit), and files refused
#: for carrying undeclared columns are pending again.
CONTRACTS: list[Contract] = [V1, V2]


def current() -> Contract:
    """The newest declared contract: the table's columns."""
    return CONTRACTS[-1]


def table_columns() -> list[Column]:
    """The curated table's columns: the first contract's, the audit columns, then the
    columns later versions added, in the order they were declared. Delta appends an added
    column at the end, so a table created today and one evolved from v1 agree."""
    return [*V1.columns, *AUDIT_COLUMNS, *current().columns[len(V1.columns):]]


def table_schema() -> pa.Schema:
    return pa.schema([(c.name, c.arrow_type) for c in table_columns()])


#: Spark SQL type -> Delta primitive type name.
DELTA_TYPES = {"INT": "integer", "BIGINT": "long", "DATE": "date", "STRING": "string", "TIMESTAMP": "timestamp",
               "BOOLEAN": "boolean"}

#: The first contract's columns: every later version starts with them.
DATA_COLUMNS: list[tuple[str, pa.DataType, str]] = [(c.name, c.arrow_type, c.sql_type) for c in V1.columns]
DATA_COLUMN_NAMES = [name for name, _, _ in DATA_COLUMNS]
FLAG_COLUMNS = ("earthquake_coverage", "flood_coverage")
BOOLEAN_VALUES = {"true": True, "t": True, "1": True, "y": True, "yes": True,
                  "false": False, "f": False, "0": False, "n": False, "no": False}

#: Audit columns kept on every curated row (like seed 002's `last_updated`).
AUDIT_COLUMNS: list[Column] = [
    Column("_operation", pa.string(), "STRING", "I, U (CDC) or L (full load)"),
    Column("_source_file", pa.string(), "STRING", "Raw object the row came from"),
    Column("_source_line", pa.int64(), "BIGINT", "Line of the row in that object"),
    Column("_applied_at", pa.timestamp("us", tz="UTC"), "TIMESTAMP", "When the run applied the row"),
    Column("_sequence", pa.string(), "STRING", "The change's sequence: file time.part.delivery.row"),
]

#: CDC files of the first contract: no header, the operation first, then the data columns.
CDC_COLUMN_NAMES = V1.cdc_names
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
    BAD_ENCODING = "bad_encoding"  # not UTF-8 text, or binary (NUL bytes)
    UNTERMINATED_QUOTE = "unterminated_quote"  # a quote opened on this line never closed
    NEGATIVE_KEY = "negative_key"
    NO_SEQUENCE = "no_sequence"
    BAD_BOOLEAN = "bad_boolean"
    UNDECLARED_COLUMN = "undeclared_column"  # the file carries columns no contract version declares
    DMS_LAYOUT = "dms_layout"  # a layout of DMS's the lake does not read (the detail names the DMS setting)


#: A deleted key and the sequence of its delete, kept for a retention window so that an
#: older change arriving late cannot bring the key back.
TOMBSTONE_SCHEMA = pa.schema([
    (KEY, pa.int32()),
    ("_sequence", pa.string()),
    ("source_file", pa.string()),
    ("deleted_at", pa.timestamp("us", tz="UTC")),
])
