"""The raw zone: objects as listed (key, ETag, size), which of them are data, which are pending.

Only keys ending `.csv` (any case), or the suffix a table's source declares (`.dat`), are data:
everything else a producer leaves beside its files -- Spark's and DMS's `_SUCCESS` markers, a
Mac's `.DS_Store`, a compressed `*.csv.gz`, a `README` -- is ignored: never applied, never quarantined, listed as `ignored`
by `lake status`. Zero-byte "directory" keys (`folder/`) are not objects at all.
An object is pending for a table while its (key, ETag) is not in that table's ledger, so a
re-delivered object (same key, new content) is pending again and an identical one is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lake_assets.resources.storage import LakeStorage

DATA_SUFFIX = ".csv"
IGNORED = "ignored"


@dataclass(frozen=True)
class RawObject:
    key: str
    etag: str
    size: int


def is_data_file(key: str, suffix: str = DATA_SUFFIX) -> bool:
    """True if the raw object at `key` is a data file to apply: its name ends with `suffix` (any case)."""
    return key.lower().endswith(suffix)


def list_raw(storage: LakeStorage, prefix: str) -> list[RawObject]:
    """Objects under `prefix` in key order (zero-byte "directory" keys left out)."""
    return [RawObject(o["Key"], o["ETag"].strip('"'), int(o["Size"])) for o in storage.list_objects(prefix)]


def pending(objects: list[RawObject], done: set[tuple[str, str]]) -> list[RawObject]:
    return [o for o in objects if (o.key, o.etag) not in done]
