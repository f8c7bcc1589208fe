"""The Dagster daemon's sensor loop, paced by the lake's sensor interval.

Dagster's sensor daemon evaluates sensors at most once per `MIN_INTERVAL_LOOP_TIME`
(5 s in dagster 1.13, `dagster/_daemon/sensor.py`), whatever a sensor's
`minimum_interval_seconds` asks for: a file landing just after a tick waits up to 5 s
before any sensor sees it, half the freshness budget. There is no setting for it, so the
lake sets that module constant to `LAKE_SENSOR_INTERVAL_SECONDS` (default 1) when the
daemon loads the lake's run launcher (`run_launcher.py` imports this module; that is the
lake's code the daemon process imports). Each sensor still ticks at its own minimum
interval. This is the one private Dagster name the daemon's pacing rests on, so its test
(`test_run_launcher.py`) runs Dagster's real sensor loop on a 1-second sensor and fails
unless setting the constant makes it tick about once a second (5 s without): a Dagster
upgrade that renames, moves or stops reading it fails the suite, not only one that
deletes it.
"""

import dagster._daemon.sensor as sensor_daemon

from lake_assets.settings import LakeSettings

#: Dagster's own period, kept as the upper bound.
DAGSTER_LOOP_SECONDS = 5


def pace_sensor_loop(settings: LakeSettings) -> float:
    """Set the sensor daemon's loop period to the lake's sensor interval (at most Dagster's 5 s)."""
    period = float(min(DAGSTER_LOOP_SECONDS, settings.sensor_interval_seconds))
    sensor_daemon.MIN_INTERVAL_LOOP_TIME = period  # type: ignore[assignment]  # declared int, used as seconds
    return period
