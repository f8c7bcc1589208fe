"""`lake dev`'s one line per run, from runs executed through a real Dagster instance."""

import datetime as dt
import re

import dagster as dg

from lake_assets.cli.dev_runs import RunReporter
from lake_assets.core.ledger import APPLIED, HELD, REJECTED, LedgerEntry
from lake_assets.core.run_outcome import RunOutcome
from lake_assets.declared.sensors import OBJECTS_TAG


@dg.asset(key=["tpcds", "item"])
def item() -> None:
    pass


@dg.asset(key=["insurance"])
def insurance() -> None:
    raise ValueError("raw/cdcload/x.csv has 3 columns, the contract 15\nsecond line")


def test_one_line_per_finished_run_each_once_with_tables_origin_and_error() -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        before = dg.materialize([item], instance=instance)
        reporter = RunReporter(instance, since=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=30))
        assert list(reporter.new_lines()) == []  # runs that ended before `lake dev` started are not news

        reporter = RunReporter(instance, since=dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1))
        ok = dg.materialize([item], instance=instance,
                            tags={"dagster/sensor_name": "raw_tpcds_sensor", OBJECTS_TAG: "2"})
        failed = dg.materialize([insurance], instance=instance, tags={"lake/launched_by": "lake run"},
                                raise_on_error=False)
        lines = [line for line in reporter.new_lines() if before.run_id[:8] not in line]
        assert re.fullmatch(rf"\d\d:\d\d:\d\d run {ok.run_id[:8]} assets SUCCESS \d+\.\d s -> tpcds\.item "
                            r"\(raw_tpcds_sensor, 2 files\)", lines[0]), lines
        assert re.fullmatch(rf"\d\d:\d\d:\d\d run {failed.run_id[:8]} assets FAILURE \d+\.\d s \(lake run\)",
                            lines[1]), lines
        assert lines[2].startswith("  error: ") and "3 columns, the contract 15" in lines[2]
        assert "second line" not in lines[2] and len(lines) == 3
        assert list(reporter.new_lines()) == []  # each run once


def _entry(status: str, applied: int, superseded: int, quarantined: int) -> LedgerEntry:
    return LedgerEntry("insurance", f"raw/cdcload/{status}-{applied}.csv", "etag", 10, "cdcload", status,
                       applied + superseded + quarantined, applied, superseded, quarantined, 1, "run",
                       dt.datetime.now(dt.timezone.utc))


def _applying(files: list[LedgerEntry]) -> dg.AssetsDefinition:
    """An asset standing for a declared table's apply: it records the run's outcome as the apply does."""
    @dg.asset(key=["insurance"])
    def applied() -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata=RunOutcome.of_files(files).as_metadata())
    return applied


def test_the_line_counts_files_and_rows_and_marks_refused_quarantined_and_held_data() -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        reporter = RunReporter(instance, since=dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1))
        clean = dg.materialize([_applying([_entry(APPLIED, 3, 1, 0)])], instance=instance)
        refused = dg.materialize([_applying([_entry(REJECTED, 0, 0, 0), _entry(APPLIED, 1, 0, 2)])], instance=instance)
        held = dg.materialize([_applying([_entry(HELD, 0, 0, 0)])], instance=instance)
        lines = {line.split()[2]: line for line in reporter.new_lines()}
        assert re.fullmatch(r"\S+ run \S+ assets SUCCESS \d+\.\d s -> insurance: files 1 applied, 0 refused, 0 held; "
                            r"rows 3 applied, 1 superseded, 0 quarantined", lines[clean.run_id[:8]])
        assert " SUCCESS [refused, quarantined] " in lines[refused.run_id[:8]]
        assert "files 1 applied, 1 refused, 0 held; rows 1 applied, 0 superseded, 2 quarantined" \
            in lines[refused.run_id[:8]]
        assert " SUCCESS [held] " in lines[held.run_id[:8]] and "0 applied, 0 refused, 1 held" in lines[held.run_id[:8]]
