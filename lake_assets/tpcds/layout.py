"""Where the fact objects lie in the raw zone, and which ones the layout refuses (no engine here).

The contract: one object per sold day of the table's calendar (schema.FIRST_DAY ..
LAST_DAY), in `ws_sold_date_sk=<the date's key>/` (or `ws_sold_date_sk=__HIVE_DEFAULT_PARTITION__/`
for the rows without a sold date), the folder Hive and Spark give a partition of that column.
An object elsewhere under the fact prefix (the older `ws_sold_date=YYYY-MM-DD/` folders
included: the reason names the folder to move it to), in a folder of a day outside the
calendar, or one of several objects in one day folder, is refused by its place, whatever it
holds: never loaded, never in the ledger (so once the layout is fixed the day loads as usual),
shown by `lake status` with what to do, and it blocks no other day.
"""

import datetime as dt
from dataclasses import dataclass

from lake_assets.core.raw_zone import RawObject, list_raw
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.raw_contract import DAY_FOLDER_COLUMN as FOLDER
from lake_assets.tpcds.raw_contract import OLD_DAY_FOLDER_COLUMN
from lake_assets.tpcds.schema import FIRST_DAY, LAST_DAY, NULL_PARTITION, RAW, TpcdsTable, ledger_name, sk_date


@dataclass(frozen=True)
class FactLayout:
    """The fact objects of the raw zone: one per sold day, and those the layout refuses."""

    objects: dict[dt.date | None, RawObject]
    refused: dict[str, str]  # object key -> why (with what to do)


def fact_layout(storage: LakeStorage, listed: list[RawObject] | None = None) -> FactLayout:
    """Every day's fact object (None: the rows without a sold date), and the objects the
    contract's layout refuses: outside a `ws_sold_date_sk=<key>` folder, in one of a day
    outside the table's calendar, or one of several objects in one day folder (the day is
    not loaded until one remains). `listed`: the objects under the fact prefix, if listed already."""
    by_day: dict[dt.date | None, list[RawObject]] = {}
    refused: dict[str, str] = {}
    for obj in list_raw(storage, RAW.facts) if listed is None else listed:
        folder, _, name = obj.key[len(RAW.facts):].partition("/")
        value = folder.split("=", 1)[1] if folder.startswith(f"{FOLDER}=") and name and "/" not in name else None
        named, day = _folder_day(value)
        if not named:
            refused[obj.key] = _misplaced(folder, name)
            continue
        if day is not None and not FIRST_DAY <= day <= LAST_DAY:
            refused[obj.key] = (f"{folder} ({day}) is outside the calendar of {ledger_name(TpcdsTable.WEB_SALES)} "
                                f"({FIRST_DAY}..{LAST_DAY}): never loaded; move it to its sold date's folder")
            continue
        by_day.setdefault(day, []).append(obj)
    objects: dict[dt.date | None, RawObject] = {}
    for day, found in by_day.items():
        if len(found) == 1:
            objects[day] = found[0]
            continue
        for obj in found:
            refused[obj.key] = (f"{RAW.fact_folder(day)} holds {len(found)} objects, the contract allows one per "
                                "day: the day is not loaded until one remains (merge them into one object, "
                                "remove the others)")
    return FactLayout(objects, refused)


def _folder_day(value: str | None) -> tuple[bool, dt.date | None]:
    """(whether the folder value names a day's key, the day: None for the undated rows)."""
    if value == NULL_PARTITION:
        return True, None
    if not value or not value.isascii() or not value.isdigit() or len(value) > 9:
        return False, None
    try:
        return True, sk_date(int(value))
    except OverflowError:
        return False, None


def _misplaced(folder: str, name: str) -> str:
    """Why an object outside a `ws_sold_date_sk=<key>` folder is refused, and where to move it."""
    target = _old_layout_folder(folder) if name and "/" not in name else None
    if target is not None:
        return (f"{folder} is the layout before the folders named the date's key: never loaded; move it to "
                f"{target}{name} (or land the star again: lake tpcds generate --clean)")
    return (f"not in a {FOLDER}=<the sold date's key> folder (one object per sold day, e.g. "
            f"{RAW.fact_folder(dt.date(1998, 1, 2))}part-00000.dat for 1998-01-02): never loaded; move it there")


def _old_layout_folder(folder: str) -> str | None:
    """The folder an object of the older `ws_sold_date=YYYY-MM-DD` layout belongs in, if `folder` is one."""
    if not folder.startswith(f"{OLD_DAY_FOLDER_COLUMN}="):
        return None
    old = folder.split("=", 1)[1]
    if old == NULL_PARTITION:
        return RAW.fact_folder(None)
    try:
        return RAW.fact_folder(dt.date.fromisoformat(old))
    except ValueError:
        return None


def refusal_if_put(storage: LakeStorage, key: str) -> str | None:
    """Why the layout would refuse a fact object put at `key` into the raw zone as it is now (None: it
    would be loaded), as `lake put` warns: a key already there is a re-delivery, not a second object."""
    listed = [obj for obj in list_raw(storage, RAW.facts) if obj.key != key]
    return fact_layout(storage, [*listed, RawObject(key, "", 0)]).refused.get(key)


def fact_objects(storage: LakeStorage) -> dict[dt.date | None, RawObject]:
    """The fact object of every day in the raw zone that the layout accepts."""
    return fact_layout(storage).objects
