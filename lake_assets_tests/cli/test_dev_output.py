"""`lake dev` leaves runs' log records out of its terminal and keeps the services' (cli/dev_output.py)."""

import io

from lake_assets.cli.dev_output import RunLogFilter, forward

TERMINAL = """\
2026-11-24 07:05:03 +0000 - dagster - DEBUG - apply_insurance - 5b46 - 5057 - insurance_tables - STEP_OUTPUT - ok
2026-11-24 07:05:24 +0000 - dagster - ERROR - apply_insurance - 7d34 - 5532 - RUN_FAILURE - interrupted
Traceback (most recent call last):
  File "x.py", line 1, in <module>
dagster._core.errors.DagsterExecutionInterruptedError
2026-11-24 07:05:25 +0000 - dagster.daemon.SensorDaemon - WARNING - the sensor tick timed out
  detail of the warning
plain line from a library
"""


def test_run_records_and_their_tracebacks_are_left_out_and_the_rest_is_shown() -> None:
    shown: list[str] = []
    forward(io.StringIO(TERMINAL), shown.append).join(5)
    assert shown == ["2026-11-24 07:05:25 +0000 - dagster.daemon.SensorDaemon - WARNING - the sensor tick timed out",
                     "  detail of the warning", "plain line from a library"]


def test_a_line_before_any_record_is_shown() -> None:
    kept = RunLogFilter()
    assert kept.shows("Serving dagster-webserver on http://127.0.0.1:3000")
    assert not kept.shows("2026-11-24 07:05:03 +0000 - dagster - INFO - load_tpcds - 1 - x")
    assert not kept.shows("  continued")
