"""The insurance table's change feed (`insurance_changes`) and SCD2 history (`insurance_history`).

Both are derived from the table's Delta log (core/change_feed.py, core/scd2.py), so a run
brings them up to date at its start (a commit made since, e.g. by `lake restore`, or a run
that failed after its table commit) and after its own commit: the feed of version V exists
exactly when V does, once a run has passed.
"""

from dataclasses import dataclass, field

import pyarrow as pa

from lake_assets.core import change_feed, scd2
from lake_assets.core.tables import INSURANCE, INSURANCE_CHANGES, INSURANCE_HISTORY
from lake_assets.insurance.contract import KEY
from lake_assets.resources.storage import LakeStorage


@dataclass
class DerivedReport:
    feed: change_feed.FeedReport = field(default_factory=change_feed.FeedReport)
    history: scd2.HistoryReport = field(default_factory=scd2.HistoryReport)

    def add(self, other: "DerivedReport") -> "DerivedReport":
        history = scd2.HistoryReport(sorted({*self.history.versions, *other.history.versions}),
                                     self.history.opened + other.history.opened,
                                     self.history.closed + other.history.closed)
        return DerivedReport(self.feed.add(other.feed), history)


def catch_up(storage: LakeStorage) -> DerivedReport:
    """Derive the feed of every insurance version it lacks, then apply it to the history."""
    feed = change_feed.catch_up(storage, INSURANCE, INSURANCE_CHANGES, KEY)
    return DerivedReport(feed, scd2.catch_up(storage, INSURANCE_CHANGES, INSURANCE_HISTORY, KEY))


def read_changes(storage: LakeStorage, start: int, end: int | None = None) -> pa.Table:
    return change_feed.read(storage, INSURANCE, INSURANCE_CHANGES, KEY, start, end)
