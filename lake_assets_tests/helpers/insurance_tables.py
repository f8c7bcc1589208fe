"""The `insurance` declaration's names, as the insurance tests use them (read from its YAML file)."""

from lake_assets.core.apply.resolve import AUDIT
from lake_assets.core.declaration import RefusalReason as Reason
from lake_assets.core.registry import declaration
from lake_assets.core.tables import table_set

DECLARED = declaration("insurance")
TABLE = DECLARED.name
_TABLES = table_set(DECLARED)
INSURANCE = _TABLES.table
INSURANCE_QUARANTINE = _TABLES.quarantine
INSURANCE_TOMBSTONES = _TABLES.tombstones
INSURANCE_CHANGES = _TABLES.changes
INSURANCE_HISTORY = _TABLES.history
#: The seed's columns (the first contract version's), as a full load's header names them.
DATA_COLUMN_NAMES = DECLARED.contracts[0].names
#: A CDC file of the first contract: the operation, then the data columns.
CDC_COLUMN_NAMES = ["op", *DATA_COLUMN_NAMES]
AUDIT_COLUMNS = AUDIT

__all__ = ["AUDIT_COLUMNS", "CDC_COLUMN_NAMES", "DATA_COLUMN_NAMES", "DECLARED", "INSURANCE", "INSURANCE_CHANGES",
           "INSURANCE_HISTORY", "INSURANCE_QUARANTINE", "INSURANCE_TOMBSTONES", "Reason", "TABLE"]
