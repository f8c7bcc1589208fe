"""The insurance table's change feed (`insurance_changes`) and SCD2 history (`insurance_history`).

A run's own commit writes its feed from the rows the apply replaced and wrote
(pipeline.py, `change_feed.write_version`), beside its history. Any other version is derived
from the table's Delta log (core/change_feed.py), which stays the source of truth: a run
catches up at its start (a commit made since, e.g. by `lake restore`, or a run killed
between its table commit and its feed write) and after its own commit. So the feed of
version V exists exactly when V does, once a run has passed, and holds the same rows
whichever way it was written. The table's first commit (a first full load) is not copied:
its feed is the files it added, read as inserts (core/change_feed.py).

The history is written by the apply itself, from the run's sequenced changes (core/scd2.py,
pipeline.py), and by `lake restore` (insurance/restore.py): it is on the source's sequence
axis, which the log does not hold.
"""

from dataclasses import dataclass, field

import pyarrow as pa

from lake_assets.core import change_feed, scd2
from lake_assets.core.tables import INSURANCE, INSURANCE_CHANGES
from lake_assets.insurance.contract import KEY
from lake_assets.resources.storage import LakeStorage


@dataclass
class DerivedReport:
    feed: change_feed.FeedReport = field(default_factory=change_feed.FeedReport)
    history: scd2.HistoryReport = field(default_factory=scd2.HistoryReport)


def catch_up(storage: LakeStorage) -> change_feed.FeedReport:
    """Derive the feed of every insurance version it lacks."""
    return change_feed.catch_up(storage, INSURANCE, INSURANCE_CHANGES, KEY)


def read_changes(storage: LakeStorage, start: int, end: int | None = None) -> pa.Table:
    return change_feed.read(storage, INSURANCE, INSURANCE_CHANGES, KEY, start, end)
