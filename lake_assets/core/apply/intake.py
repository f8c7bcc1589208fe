"""What the change core will make of a raw object, told when it is put (`lake put`).

The same rules as a run, from the same functions: `is_data_file` decides what is
ignored, `object_refusal` (core/apply/layout.py) what is refused whole by its name: a CDC
file whose name and folders give no time (`no_sequence`), a DMS transaction file; and
`folder_partition` (core/apply/partitions.py) a partition snapshot outside its partition's
folder. A full load needs no time of its own (it is stamped as of its arrival).
"""

import datetime as dt

from lake_assets.core.apply.layout import object_refusal
from lake_assets.core.apply.partitions import folder_partition
from lake_assets.core.declaration import RefusalReason as Reason, TableDeclaration
from lake_assets.core.dms import DmsLayout
from lake_assets.core.raw_zone import DATA_SUFFIX, is_data_file


def dms_name(now: dt.datetime, suffix: str = DATA_SUFFIX) -> str:
    """The AWS DMS file name for `now` (UTC): `YYYYMMDD-HHMMSSfff.csv` (or the source's `suffix`)."""
    now = now.astimezone(dt.timezone.utc)
    return f"{now:%Y%m%d-%H%M%S}{now.microsecond // 1000:03d}{suffix}"


def refusal(declaration: TableDeclaration, key: str, dms: DmsLayout, now: dt.datetime) -> str | None:
    """Why a run of the declared table will ignore or refuse the raw object at `key` (one line,
    with the name to use instead), or None when its name is fine."""
    name = key.rpartition("/")[2]
    source = declaration.source(key)
    suffix = DATA_SUFFIX if source is None else source.suffix
    if not is_data_file(key, suffix):
        stem, compressed, _ = name.lower().partition(suffix + ".")
        hint = f"; put it uncompressed, as --as {name[:len(stem)]}{suffix}" if compressed else ""
        return f"{name} will be ignored, never applied: only *{suffix} files are data{hint}"
    # with `sequence_by`, a CDC file's rows say their order: its name needs no time (as in a run)
    refused = None if source is None else object_refusal(source, key, dms, declaration.sequence_by is None)
    if refused is None and source is not None and source.partition is not None:
        placed = folder_partition(declaration, source, key)
        if isinstance(placed, str):
            return (f"{name} will be refused ({Reason.WRONG_PARTITION.value}): {placed}; "
                    f"e.g. --as {source.partition}=<value>/{name}")
    if refused is None:
        return None
    if refused.reason == Reason.NO_SEQUENCE:
        return (f"{name} will be refused ({Reason.NO_SEQUENCE.value}): its name and folders give no time to "
                f"order its changes by; name it as DMS does, e.g. --as {dms_name(now, suffix)}, "
                f"or put it in {dms.folder_date_format} folders")
    return f"{name} will be refused ({refused.reason.value}): {refused.detail}"
