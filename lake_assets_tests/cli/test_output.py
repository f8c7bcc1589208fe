"""The CLI's layouts: on a terminal a result too wide for the window is printed one record per
block (psql's expanded display) rather than squeezed into 3-character columns; to a pipe the
table keeps its columns."""

import pytest
from rich.console import Console

from lake_assets.cli import output
from lake_assets.cli.output import Format, fits, render

WIDE_COLUMNS = [f"column_number_{i}" for i in range(12)]
WIDE_ROWS = [tuple(f"value {r}.{i}" for i in range(12)) for r in range(2)]


def terminal(monkeypatch: pytest.MonkeyPatch, width: int) -> Console:
    """A terminal of `width` columns (tall enough not to page) in place of the CLI's console."""
    screen = Console(force_terminal=True, width=width, height=200, color_system=None, record=True)
    monkeypatch.setattr(output, "console", screen)
    return screen


def test_fits_counts_each_column_at_its_content_or_the_minimum_width() -> None:
    assert fits(["a", "b"], [(1, 2)], 9)  # two 1-character columns and their borders: 1 + 1 + 3 * 2 + 1
    assert not fits(["a", "b"], [(1, 2)], 8)
    assert fits(WIDE_COLUMNS, WIDE_ROWS, 12 * (output.MIN_COLUMN_WIDTH + 3) + 1)
    assert not fits(WIDE_COLUMNS, WIDE_ROWS, 120)


def test_a_wide_result_on_a_terminal_is_printed_one_record_per_block(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = terminal(monkeypatch, 100)
    render(WIDE_COLUMNS, WIDE_ROWS, Format.table)
    text = screen.export_text()
    assert "-[ RECORD 1 ]" in text and "-[ RECORD 2 ]" in text
    assert "column_number_11 | value 1.11" in text  # every value whole, beside its column's name
    assert "┃" not in text and "│" not in text  # no table borders


def test_a_result_that_fits_stays_a_table_and_vertical_can_be_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = terminal(monkeypatch, 100)
    render(["a", "b"], [(1, None)], Format.table)
    table = screen.export_text()
    assert "RECORD" not in table and "NULL" in table and "┃" in table
    render(["a", "b"], [(1, None)], Format.vertical)
    vertical = screen.export_text()
    assert "-[ RECORD 1 ]" in vertical and "b | NULL" in vertical


def test_a_wide_result_to_a_pipe_keeps_its_columns(capsys: pytest.CaptureFixture[str]) -> None:
    assert not output.console.is_terminal  # the CLI's console under pytest writes to a pipe
    render(WIDE_COLUMNS, WIDE_ROWS, Format.table)
    assert "RECORD" not in capsys.readouterr().out
