"""A run's report survives the trip an AWS job sends it on (JSON in a Dagster Pipes message)."""

import datetime as dt
import json

from lake_assets.core.apply.report_json import report_from_json, report_to_json
from lake_assets.core.apply.run import ApplyReport, Commit, DerivedReport
from lake_assets.core.change_feed import FeedReport
from lake_assets.core.ledger import LedgerEntry


def _report() -> ApplyReport:
    recorded = dt.datetime(2024, 4, 2, 9, 0, 0, 123456, tzinfo=dt.UTC)
    files = [LedgerEntry("insurance", "raw/fullload/full-load.csv", "e1", 1504, "fullload", "applied", 32, 26, 5, 1, 0,
                         "run-1", recorded, None, "0000.1"),
             LedgerEntry("insurance", "raw/cdcload/x.bin", "e2", 9, "cdcload", "rejected", None, 0, 0, 0, None,
                         "run-1", recorded, "unreadable_file: not text", None)]
    return ApplyReport(run_id="run-1", version_before=None, rows_before=0, version_after=1, rows_after=26,
                       commits=[Commit(0, "full load", 26, 0, 0, 26, "create"), Commit(1, "cdc", 0, 2, 1, 25)],
                       files=files, duration_seconds=1.5,
                       derived=DerivedReport(FeedReport([0, 1], {"insert": 26, "delete": 1}, 1), 1, 32),
                       expectations={"positive_value": 2}, quarantined_by_reason={"bad_date": 1})


def test_a_report_comes_back_from_json_as_it_was_sent() -> None:
    report = _report()
    assert report_from_json(json.loads(json.dumps(report_to_json(report)))) == report


def test_an_empty_report_comes_back_too() -> None:
    report = ApplyReport(run_id="run-2", version_before=3, rows_before=10)
    assert report_from_json(json.loads(json.dumps(report_to_json(report)))) == report
