"""What a long command is doing, while it does it: one Rich progress line for the current
step on stderr (stdout stays the command's result), cleared when the command ends. On a
pipe or a file Rich draws nothing, so scripts see only the result lines.

The line is drawn on a duplicate of the terminal's stderr descriptor: while a Dagster run
executes in this process, Dagster captures descriptors 1 and 2 into the step's compute log,
and a display written there would freeze until the run ends."""

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn


class StepProgress:
    """Steps in order; a step with a total counts up to it (objects, rows), else it spins."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._task: TaskID | None = None

    def step(self, description: str, total: int | None = None) -> None:
        if self._task is not None:
            self._progress.update(self._task, visible=False)
        self._task = self._progress.add_task(description, total=total, count="" if total is None else f"0/{total}")

    def advance(self, count: int = 1) -> None:
        if self._task is None:
            return
        self._progress.advance(self._task, count)
        task = self._progress.tasks[self._task]
        self._progress.update(self._task, count=f"{task.completed:g}/{task.total:g}")


@contextlib.contextmanager
def step_progress() -> Iterator[StepProgress]:
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[count]}"),
               TimeElapsedColumn())
    with _terminal() as terminal, Progress(*columns, console=Console(file=terminal, stderr=True),
                                           transient=True) as progress:
        yield StepProgress(progress)


@contextlib.contextmanager
def _terminal() -> Iterator[TextIO]:
    """A duplicate of stderr's descriptor, or stderr itself where it has none (a test's capture)."""
    try:
        descriptor = os.dup(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError and a ValueError
        yield sys.stderr
        return
    with os.fdopen(descriptor, "w") as terminal:
        yield terminal
