"""Where the fact objects lie in the raw zone, and which ones the layout refuses (no engine here).

The contract: one object per sold day of the table's calendar (schema.FIRST_DAY ..
LAST_DAY), in `ws_sold_date=YYYY-MM-DD/` (or `ws_sold_date=__HIVE_DEFAULT_PARTITION__/` for
the rows without a sold date). An object elsewhere under the fact prefix, in a folder dated
outside the calendar, or one of several objects in one day folder, is refused by its place,
whatever it holds: never loaded, never in the ledger (so once the layout is fixed the day
loads as usual), shown by `lake status` with what to do, and it blocks no other day.
"""

import datetime as dt
from dataclasses import dataclass

from lake_assets.core.raw_zone import RawObject, list_raw
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.schema import FIRST_DAY, LAST_DAY, NULL_PARTITION, RAW, ledger_name, TpcdsTable

FOLDER = "ws_sold_date"  # the hive-style partition folder of the fact objects


@dataclass(frozen=True)
class FactLayout:
    """The fact objects of the raw zone: one per sold day, and those the layout refuses."""

    objects: dict[dt.date | None, RawObject]
    refused: dict[str, str]  # object key -> why (with what to do)


def fact_layout(storage: LakeStorage, listed: list[RawObject] | None = None) -> FactLayout:
    """Every day's fact object (None: the rows without a sold date), and the objects the
    contract's layout refuses: outside a `ws_sold_date=YYYY-MM-DD` folder, in one dated
    outside the table's calendar, or one of several objects in one day folder (the day is
    not loaded until one remains). `listed`: the objects under the fact prefix, if listed already."""
    by_day: dict[dt.date | None, list[RawObject]] = {}
    refused: dict[str, str] = {}
    for obj in list_raw(storage, RAW.facts) if listed is None else listed:
        folder, _, name = obj.key[len(RAW.facts):].partition("/")
        value = folder.split("=", 1)[1] if folder.startswith(f"{FOLDER}=") and name and "/" not in name else None
        named, day = _folder_day(value)
        if not named:
            refused[obj.key] = (f"not in a {FOLDER}=YYYY-MM-DD folder (one object per sold day, e.g. "
                                f"{RAW.fact_folder(dt.date(1998, 1, 2))}part-00000.dat): never loaded; move it there")
            continue
        if day is not None and not FIRST_DAY <= day <= LAST_DAY:
            refused[obj.key] = (f"{folder} is outside the calendar of {ledger_name(TpcdsTable.WEB_SALES)} "
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
    """(whether the folder value names a day, the day: None for the undated rows)."""
    if value == NULL_PARTITION:
        return True, None
    try:
        return (True, dt.date.fromisoformat(value)) if value and len(value) == 10 else (False, None)
    except ValueError:
        return False, None


def fact_objects(storage: LakeStorage) -> dict[dt.date | None, RawObject]:
    """The fact object of every day in the raw zone that the layout accepts."""
    return fact_layout(storage).objects
