"""What `lake dev` shows of its Dagster services' terminal (cli/dev_services.py): its services' warnings and errors, not the
log lines of every run.

Runs are started by the code server (Dagster's default launcher), so each run's console log
(Dagster's `colored_console_logger`, DEBUG and up, logger name `dagster`) reaches the same
terminal as the services'. `lake dev` prints one line per finished run instead, with its error
(cli/dev_runs.py), and the UI has every event; so a run's lines, tracebacks included, are left
out here, and everything else (the services log at WARNING) passes. `lake dev --verbose` shows
it all.
"""

import re
import threading
from collections.abc import Callable
from typing import IO

#: The first line of a run's log record: `2026-11-24 07:05:03 +0000 - dagster - DEBUG - <job> - ...`.
RUN_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4} - dagster - [A-Z]+ - ")
#: The first line of any other Dagster record (a service's: `... - dagster.daemon.SensorDaemon - WARNING - ...`).
OTHER_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4} - ")


class RunLogFilter:
    """Decides line by line; a record's continuation lines (a traceback) go with its first line."""

    def __init__(self) -> None:
        self._in_run_record = False

    def shows(self, line: str) -> bool:
        if RUN_RECORD.match(line):
            self._in_run_record = True
        elif OTHER_RECORD.match(line):
            self._in_run_record = False
        return not self._in_run_record


def forward(stream: IO[str], show: Callable[[str], None]) -> threading.Thread:
    """Read `stream` to its end in a daemon thread, passing the lines `RunLogFilter` shows to `show`."""
    def pump() -> None:
        kept = RunLogFilter()
        for line in stream:
            if kept.shows(line):
                show(line.rstrip("\n"))

    thread = threading.Thread(target=pump, name="dagster-dev-output", daemon=True)
    thread.start()
    return thread
