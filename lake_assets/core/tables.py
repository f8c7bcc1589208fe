"""The lake's tables by name: where each lives in the bucket and what it holds.

`lake query` resolves table names through this registry; new domains add their tables here.
"""

from dataclasses import dataclass

from lake_assets.core.errors import UsageError
from lake_assets.resources.storage import LakeStorage


@dataclass(frozen=True)
class LakeTable:
    name: str
    prefix: str  # key prefix of the table in the bucket
    description: str
    format: str = "delta"

    def uri(self, storage: LakeStorage) -> str:
        return storage.uri(self.prefix)


INSURANCE = LakeTable("insurance", "curated/insurance", "curated insurance policies (full load + CDC)")
INSURANCE_QUARANTINE = LakeTable(
    "insurance_quarantine", "curated/insurance_quarantine", "raw rows that could not be applied, with the reason"
)
INSURANCE_TOMBSTONES = LakeTable(
    "insurance_tombstones", "curated/insurance_tombstones",
    "deleted policy keys and the sequence of their delete, kept for the retention window",
)
LEDGER = LakeTable("lake_ledger", "curated/_lake/ledger", "which raw objects were applied or rejected, by which run")

TABLES: dict[str, LakeTable] = {t.name: t for t in (INSURANCE, INSURANCE_QUARANTINE, INSURANCE_TOMBSTONES, LEDGER)}


class UnknownTable(UsageError):
    """A table name that is not in the registry."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown table {name!r}; known tables: {', '.join(sorted(TABLES))}")


def table(name: str) -> LakeTable:
    try:
        return TABLES[name]
    except KeyError:
        raise UnknownTable(name) from None
