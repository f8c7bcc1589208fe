"""Render rows as a Rich table, one record per block (vertical), CSV or JSON.

On a terminal a table is laid out the way a database CLI lays it out (psql's `\\x auto` and
its pager): a result too wide for the window is printed one record per block, column names
down the left (`vertical`), instead of squeezing every column to a few characters; a result
taller than the window goes through the pager (`$PAGER`, else `less`). Written to a pipe or a
file, a table keeps its columns whatever its width (240 characters wide), and nothing pages.
"""

import csv
import datetime as dt
import decimal
import io
import json
import sys
from collections.abc import Sequence
from enum import StrEnum

from rich.console import Console
from rich.table import Table

#: Wide when writing to a pipe or file, so query results are not folded into 80 columns.
console = Console(width=None if sys.stdout.isatty() else 240)
errors = Console(stderr=True, soft_wrap=True)  # one error, one line, whatever its length

#: On a terminal, a table goes vertical unless every column gets at least this many characters
#: (or its whole content, if shorter): below it, values turn into columns of 3-character lines.
MIN_COLUMN_WIDTH = 12


class Format(StrEnum):
    table = "table"  # a table; on a terminal, vertical when too wide, paged when too tall
    vertical = "vertical"  # one block per record, `column | value` lines (psql's expanded display)
    csv = "csv"
    json = "json"


def _plain(value: object) -> object:
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value


def _text(value: object) -> str:
    return "NULL" if value is None else str(_plain(value))


def fits(columns: Sequence[str], rows: Sequence[tuple], width: int) -> bool:
    """Whether a table of these columns reads in `width` characters: each column as wide as its
    content or `MIN_COLUMN_WIDTH`, whichever is less, plus the borders (3 per column, 1 more)."""
    widths = [len(name) for name in columns]
    for row in rows:
        widths = [max(w, len(_text(v))) for w, v in zip(widths, row)]
    return sum(min(w, MIN_COLUMN_WIDTH) for w in widths) + 3 * len(columns) + 1 <= width


def render(columns: list[str], rows: list[tuple], fmt: Format, title: str | None = None,
           sections: list[bool] | None = None) -> None:
    """Print `rows` in `fmt`; `sections` marks rows that close a group (a total line, drawn after a rule)."""
    if fmt is Format.json:
        print(json.dumps([dict(zip(columns, map(_plain, row))) for row in rows], default=str))
    elif fmt is Format.csv:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([["" if v is None else _plain(v) for v in row] for row in rows])
        print(buffer.getvalue(), end="")
    elif fmt is Format.vertical or (console.is_terminal and not fits(columns, rows, console.width)):
        _show(_vertical(columns, rows, title), len(rows) * (len(columns) + 1) + 1)
    else:
        table = Table(title=title, show_lines=False)
        for column in columns:
            table.add_column(column, overflow="fold")
        for index, row in enumerate(rows):
            closes = sections is not None and sections[index]
            if closes and index:
                table.add_section()
            table.add_row(*[_text(v) for v in row], style="bold" if closes else None)
            if closes and index + 1 < len(rows):
                table.add_section()
        _show(table, len(rows) + 4 + (1 if title else 0))


def _vertical(columns: list[str], rows: list[tuple], title: str | None) -> str:
    """One block per record: a `-[ RECORD n ]-` line, then `column | value`, names padded alike."""
    from rich.markup import escape

    pad = max((len(c) for c in columns), default=0)
    lines = [escape(title)] if title else []
    for number, row in enumerate(rows, 1):
        lines.append(f"[dim]-[ RECORD {number} ]{'-' * max(pad - 8, 3)}[/dim]")
        lines += [f"[bold]{escape(c.ljust(pad))}[/bold] | {escape(_text(v))}" for c, v in zip(columns, row)]
    if not rows:
        lines.append("(0 rows)")
    return "\n".join(lines)


def _show(renderable: object, height: int) -> None:
    """Print; through the pager when on a terminal and taller than its window."""
    if console.is_terminal and height > console.height:
        import os

        os.environ.setdefault("LESS", "FRX")  # as git pages: colours kept, no pager for what fits one screen
        with console.pager(styles=True):
            console.print(renderable)
    else:
        console.print(renderable)
