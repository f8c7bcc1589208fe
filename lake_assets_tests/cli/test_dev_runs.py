"""`lake dev`'s one line per run, from runs executed through a real Dagster instance."""

import datetime as dt
import re

import dagster as dg

from lake_assets.cli.dev_runs import RunReporter
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
