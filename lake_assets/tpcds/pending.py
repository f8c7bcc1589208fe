"""What the TPC-DS raw zone holds that the tables have not taken in yet (no Dagster here).

The sensor, the schedule and `lake run` all ask this one question and launch one run for
the answer: the dimension snapshots to upsert, the range of sold days to load (a range,
so one run loads it), whether the rows without a sold date are pending, and whether
corrections are waiting.
"""

import datetime as dt
from dataclasses import dataclass

from lake_assets.core.ledger import HELD, Ledger, settled
from lake_assets.core.raw_zone import RawObject, list_raw, pending
from lake_assets.core.snapshot_guard import Held
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.corrections import WEB_SALES, pending_corrections
from lake_assets.tpcds.layout import fact_objects
from lake_assets.tpcds.load import pending_dimensions, pending_exports, pending_fact_days
from lake_assets.tpcds.schema import DECLARATIONS, RAW


@dataclass(frozen=True)
class PendingWork:
    dimensions: tuple[str, ...]
    days: tuple[dt.date, ...]
    undated: bool  # the object of rows without a sold date
    corrections: int

    @property
    def empty(self) -> bool:
        return not (self.dimensions or self.days or self.undated or self.corrections)

    def day_range(self, storage: LakeStorage) -> tuple[dt.date, dt.date] | None:
        """First and last pending day; with only undated rows pending, the newest raw day
        (its partition is re-loaded, which changes nothing, so the run can carry them)."""
        if self.days:
            return self.days[0], self.days[-1]
        if self.undated:
            dated = [day for day in fact_objects(storage) if day is not None]
            if dated:
                return max(dated), max(dated)
        return None


def pending_work(storage: LakeStorage, reapply: bool = False) -> PendingWork:
    """What is pending; with `reapply` (`lake run --reapply`), the objects `lake restore`
    reverted count as pending too (a plain run, the sensor and the schedule leave them)."""
    ledger = Ledger(storage)
    days = pending_fact_days(storage, ledger, reapply)
    return PendingWork(
        dimensions=tuple(pending_dimensions(storage, ledger, reapply)),
        days=tuple(sorted(d for d in days if d is not None)),
        undated=None in days,
        corrections=len(pending_corrections(storage, ledger, reapply)),
    )


def reverted_days(storage: LakeStorage, ledger: Ledger,
                  objects: dict[dt.date | None, RawObject] | None = None) -> set[dt.date | None]:
    """Days whose object `lake restore` reverted: a run re-loading a range of days leaves them
    as they are unless it says `reapply`. `objects`: the fact objects, if listed already."""
    objects = fact_objects(storage) if objects is None else objects
    latest = ledger.latest(WEB_SALES)
    reverted = settled(latest) - settled(latest, reapply=True)
    return {day for day, obj in objects.items() if (obj.key, obj.etag) in reverted}


def pending_objects(storage: LakeStorage, ledger: Ledger, reapply: bool = False) -> list[tuple[str, RawObject]]:
    """Every raw object some table has not taken in yet (with `reapply`, also the reverted ones),
    with that table's name (as the ledger names it): each dimension's exports, as the change core
    that applies them finds them (any object under its prefix), fact days and corrections (one
    read of the ledger)."""
    latest = ledger.latest_by_table()
    found: list[tuple[str, RawObject]] = [(DECLARATIONS[name].table_name, f) for name, exports
                                          in pending_exports(storage, latest, reapply).items() for f in exports]
    facts = [*fact_objects(storage).values(), *list_raw(storage, RAW.corrections)]
    return found + [(WEB_SALES, obj) for obj in pending(facts, settled(latest.get(WEB_SALES, {}), reapply))]


def held_objects(storage: LakeStorage) -> list[Held]:
    """Day objects waiting for `lake approve` (their ledger entry's `detail` says why), each a
    snapshot of its own."""
    latest = Ledger(storage).latest(WEB_SALES)
    return [Held(latest[(o.key, o.etag)], o.key) for o in fact_objects(storage).values()
            if latest.get((o.key, o.etag), {}).get("status") == HELD]
