"""A run's report as JSON and back: how an AWS job (lake_assets/aws/job.py) hands its `ApplyReport`
to the orchestrator (a Dagster Pipes custom message), which makes the assets' metadata from it as it
does for a run on its own engine (declared/assets.py `table_metadata`)."""

import datetime as dt
from dataclasses import asdict
from typing import Any

from lake_assets.core.apply.run import ApplyReport, Commit, DerivedReport
from lake_assets.core.change_feed import FeedReport
from lake_assets.core.ledger import LedgerEntry


def report_to_json(report: ApplyReport) -> dict[str, Any]:
    data = asdict(report)
    data["files"] = [{**entry, "recorded_at": entry["recorded_at"].isoformat()} for entry in data["files"]]
    return data


def report_from_json(data: dict[str, Any]) -> ApplyReport:
    derived = data["derived"]
    return ApplyReport(
        run_id=data["run_id"], version_before=data["version_before"], rows_before=data["rows_before"],
        version_after=data["version_after"], rows_after=data["rows_after"],
        commits=[Commit(**commit) for commit in data["commits"]],
        files=[LedgerEntry(**{**entry, "recorded_at": dt.datetime.fromisoformat(entry["recorded_at"])})
               for entry in data["files"]],
        duration_seconds=data["duration_seconds"],
        derived=DerivedReport(FeedReport(**derived["feed"]), derived["history_version"], derived["history_changes"]),
        expectations=dict(data["expectations"]), quarantined_by_reason=dict(data["quarantined_by_reason"]))
