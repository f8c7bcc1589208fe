"""Render rows as a Rich table, CSV or JSON."""

import csv
import datetime as dt
import decimal
import io
import json
import sys
from enum import StrEnum

from rich.console import Console
from rich.table import Table

#: Wide when writing to a pipe or file, so query results are not folded into 80 columns.
console = Console(width=None if sys.stdout.isatty() else 240)
errors = Console(stderr=True, soft_wrap=True)  # one error, one line, whatever its length


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def _plain(value: object) -> object:
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value


def render(columns: list[str], rows: list[tuple], fmt: Format, title: str | None = None) -> None:
    if fmt is Format.json:
        print(json.dumps([dict(zip(columns, map(_plain, row))) for row in rows], default=str))
    elif fmt is Format.csv:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([["" if v is None else _plain(v) for v in row] for row in rows])
        print(buffer.getvalue(), end="")
    else:
        table = Table(title=title, show_lines=False)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*["NULL" if v is None else str(_plain(v)) for v in row])
        console.print(table)
