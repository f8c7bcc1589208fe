"""How long work reports what it is doing: steps, and counts within a step. The CLI draws
it (cli/progress.py); code that runs elsewhere reports to `SILENT`."""

from typing import Protocol


class Progress(Protocol):
    def step(self, description: str, total: int | None = None) -> None:
        """A new step begins; with a total, it counts up to it (objects, rows)."""

    def advance(self, count: int = 1) -> None:
        """`count` more of the current step's total are done."""


class _Silent:
    def step(self, description: str, total: int | None = None) -> None:
        pass

    def advance(self, count: int = 1) -> None:
        pass


SILENT: Progress = _Silent()
