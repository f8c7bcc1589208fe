"""What a raw object under a declared source's prefix is (its own module: the CLI names the kinds
without loading the declaration models)."""

from enum import StrEnum


class SourceKind(StrEnum):
    """What a raw object under a source's prefix is."""

    CDC = "cdc"  # changes: one row per insert, update or delete, the operation in the row
    SNAPSHOT = "snapshot"  # a full load: the whole table as of its stamp (keys it lacks are deleted)
