"""The raw zone: objects as listed (key, ETag, size), and which of them are still pending.

An object is pending for a table while its (key, ETag) is not in that table's ledger, so a
re-delivered object (same key, new content) is pending again and an identical one is not.
"""

from dataclasses import dataclass

from lake_assets.resources.storage import LakeStorage


@dataclass(frozen=True)
class RawObject:
    key: str
    etag: str
    size: int


def list_raw(storage: LakeStorage, prefix: str) -> list[RawObject]:
    """Objects under `prefix` in key order (zero-byte "directory" keys left out)."""
    return [RawObject(o["Key"], o["ETag"].strip('"'), int(o["Size"])) for o in storage.list_objects(prefix)]


def pending(objects: list[RawObject], done: set[tuple[str, str]]) -> list[RawObject]:
    return [o for o in objects if (o.key, o.etag) not in done]
