"""A `partition_by` entry: a column (a partition per value) or an Iceberg transform of one.

Spelled as Spark SQL's `PARTITIONED BY` spells them for an Iceberg table: `region`,
`bucket(16, id)`, `truncate(365, sold_date_sk)`, `years(ts)`, `months(ts)`, `days(ts)`,
`hours(ts)` (`year`, `month`, `day` and `hour` are accepted for the last four). A transform is
Iceberg's hidden partitioning: the table is partitioned by the transform's value, queries filter
on the column itself, and rows need no extra column. Delta partitions by a column's value only.
"""

import re
from dataclasses import dataclass
from enum import StrEnum

#: The types an identity partition's column may have (exact values that name a folder).
PARTITION_TYPES = ("INT", "BIGINT", "STRING", "DATE", "BOOLEAN")


class Transform(StrEnum):
    """An Iceberg partition transform, by its Spark SQL name."""

    IDENTITY = "identity"
    BUCKET = "bucket"
    TRUNCATE = "truncate"
    YEARS = "years"
    MONTHS = "months"
    DAYS = "days"
    HOURS = "hours"


#: The column types each transform takes (Iceberg's spec, less those the lake does not declare).
TRANSFORM_TYPES: dict[Transform, tuple[str, ...]] = {
    Transform.IDENTITY: PARTITION_TYPES,
    Transform.BUCKET: ("INT", "BIGINT", "STRING", "DATE", "TIMESTAMP"),
    Transform.TRUNCATE: ("INT", "BIGINT", "STRING"),
    Transform.YEARS: ("DATE", "TIMESTAMP"),
    Transform.MONTHS: ("DATE", "TIMESTAMP"),
    Transform.DAYS: ("DATE", "TIMESTAMP"),
    Transform.HOURS: ("TIMESTAMP",),
}
_WIDTHS = (Transform.BUCKET, Transform.TRUNCATE)
_ALIASES = {"year": Transform.YEARS, "month": Transform.MONTHS, "day": Transform.DAYS, "hour": Transform.HOURS}
#: Iceberg's partition field name suffix per transform (what Spark and pyiceberg name them).
_SUFFIXES = {Transform.BUCKET: "bucket", Transform.TRUNCATE: "trunc", Transform.YEARS: "year",
             Transform.MONTHS: "month", Transform.DAYS: "day", Transform.HOURS: "hour"}
_COLUMN = r"([a-z_][a-z0-9_]*)"
_ENTRY = re.compile(rf"{_COLUMN}|([a-z]+)\(\s*(?:([0-9]+)\s*,\s*)?{_COLUMN}\s*\)", re.IGNORECASE)
FORMS = "a column, bucket(N, column), truncate(W, column), years(column), months(column), days(column) " \
        "or hours(column)"


@dataclass(frozen=True)
class PartitionField:
    """One partition of a table's spec: the column, its transform, and the bucket count or width."""

    column: str
    transform: Transform = Transform.IDENTITY
    width: int | None = None

    @property
    def text(self) -> str:
        """The entry as declared, spelled one way (`bucket(16, id)`, `region`)."""
        if self.transform is Transform.IDENTITY:
            return self.column
        width = f"{self.width}, " if self.width is not None else ""
        return f"{self.transform.value}({width}{self.column})"

    @property
    def name(self) -> str:
        """The Iceberg partition field's name (`id_bucket`, `ts_day`; the column for identity)."""
        suffix = _SUFFIXES.get(self.transform)
        return self.column if suffix is None else f"{self.column}_{suffix}"


def partition_field(entry: str) -> PartitionField:
    """The partition field a `partition_by` entry declares (ValueError: one line saying what it allows)."""
    found = _ENTRY.fullmatch(entry.strip())
    if found is None:
        raise ValueError(f"partition_by: {entry!r} is not {FORMS}")
    identity, function, width, column = found.groups()
    if identity is not None:
        return PartitionField(identity)
    spelled = function.lower()
    transform = _ALIASES.get(spelled) or next((t for t in Transform if t.value == spelled and
                                               t is not Transform.IDENTITY), None)
    if transform is None:
        raise ValueError(f"partition_by: {entry!r}: {function} is not a partition transform ({FORMS})")
    if (transform in _WIDTHS) != (width is not None):
        raise ValueError(f"partition_by: {entry!r}: " + (f"{transform.value} takes a width first, e.g. "
                                                         f"{transform.value}(16, {column})" if transform in _WIDTHS
                                                         else f"{transform.value} takes the column alone"))
    if width is not None and not 0 < int(width) < 2**31:
        raise ValueError(f"partition_by: {entry!r}: the width must be a positive integer")
    return PartitionField(column, transform, int(width) if width is not None else None)


def iceberg_transform(field: PartitionField):  # a pyiceberg Transform
    """The pyiceberg transform of a partition field."""
    from pyiceberg import transforms

    if field.width is not None:  # bucket or truncate
        return transforms.BucketTransform(field.width) if field.transform is Transform.BUCKET else \
            transforms.TruncateTransform(field.width)
    return {Transform.IDENTITY: transforms.IdentityTransform, Transform.YEARS: transforms.YearTransform,
            Transform.MONTHS: transforms.MonthTransform, Transform.DAYS: transforms.DayTransform,
            Transform.HOURS: transforms.HourTransform}[field.transform]()


def iceberg_partitioning(table) -> list[str]:  # a pyiceberg Table
    """An Iceberg table's current partition spec as `partition_by` entries (`truncate(365, sk)`)."""
    schema = table.schema()
    entries = []
    for spec_field in table.spec().fields:
        column = schema.find_field(spec_field.source_id).name
        name, _, width = str(spec_field.transform).rstrip("]").partition("[")
        transform = _ALIASES.get(name) or Transform(name)
        entries.append(PartitionField(column, transform, int(width) if width else None).text)
    return entries
