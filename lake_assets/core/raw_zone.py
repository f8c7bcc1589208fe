"""The raw zone's one rule for which objects are data: a key ending `.csv` (any case).

Everything else a producer leaves beside its files -- Spark's and DMS's `_SUCCESS` markers,
a Mac's `.DS_Store`, a compressed `*.csv.gz`, a `README` -- is ignored: never applied,
never quarantined, listed as `ignored` by `lake status`. Zero-byte "directory" keys
(`folder/`) are not objects at all and are left out everywhere.
"""

from lake_assets.resources.storage import LakeStorage

DATA_SUFFIX = ".csv"
IGNORED = "ignored"


def is_data_file(key: str) -> bool:
    """True if the raw object at `key` is a CSV file to apply."""
    return key.lower().endswith(DATA_SUFFIX)


def ignored_objects(storage: LakeStorage, prefixes: list[str]) -> list[dict]:
    """Objects under `prefixes` that are not data files, in key order."""
    return [o for prefix in prefixes for o in storage.list_objects(prefix) if not is_data_file(o["Key"])]
