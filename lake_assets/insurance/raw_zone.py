"""Where the insurance table's raw files land, and the listing of them (boto3 only, no engine)."""

from dataclasses import dataclass

from lake_assets.core.raw_zone import RawObject, is_data_file
from lake_assets.resources.storage import LakeStorage

RAW_FULLLOAD = "raw/fullload/"
RAW_CDC = "raw/cdcload/"
FULLLOAD, CDCLOAD = "fullload", "cdcload"


@dataclass(frozen=True)
class InsuranceFile(RawObject):
    """A raw insurance CSV: the raw object and the load it belongs to."""

    kind: str  # fullload | cdcload


def raw_objects(storage: LakeStorage) -> list[InsuranceFile]:
    """Every raw data file: full loads, then CDC files, each in key order."""
    return [
        InsuranceFile(o["Key"], o["ETag"].strip('"'), int(o["Size"]), kind)
        for prefix, kind in ((RAW_FULLLOAD, FULLLOAD), (RAW_CDC, CDCLOAD))
        for o in storage.list_objects(prefix)
        if is_data_file(o["Key"])  # `_SUCCESS`, `.DS_Store`, `*.gz`, ...: ignored (core/raw_zone.py)
    ]
