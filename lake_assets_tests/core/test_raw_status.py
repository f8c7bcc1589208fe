"""`lake status`'s summary and filters (core/raw_status.py), on statuses built by hand."""

import datetime as dt

import pytest

from lake_assets.core.raw_status import ALL_TABLES, FileStatus, select, since, summarize

NOW = dt.datetime(2024, 4, 2, 12, 0, tzinfo=dt.timezone.utc)


def status(file: str, state: str, table: str = "insurance", domain: str = "insurance", *, applied: int | None = None,
           superseded: int | None = None, quarantined: int | None = None, at: str | None = "2024-04-01T09:00:00+00:00"
           ) -> FileStatus:
    return FileStatus(file, 10, state, None, None, applied, superseded, quarantined, None, table, domain, at)


STATUSES = [
    status("raw/fullload/a.csv", "applied", applied=5, superseded=0, quarantined=1),
    status("raw/cdcload/b.csv", "applied", applied=0, superseded=3, quarantined=0),  # every row older: superseded
    status("raw/cdcload/c.csv", "rejected", quarantined=4, at="2024-04-02T11:30:00+00:00"),
    status("raw/cdcload/d.csv", "pending", at="2024-04-02T11:50:00+00:00"),
    status("raw/tpcds/item/item.dat", "applied", "tpcds.item", "tpcds", applied=7, superseded=0, quarantined=0),
    status("raw/tpcds/web_sales/x", "held", "tpcds.web_sales", "tpcds", applied=2, superseded=0, quarantined=0),
    status("raw/tpcds/web_sales/y", "pending (re-delivered)", "tpcds.web_sales", "tpcds", at=None),
]


def test_the_summary_counts_files_by_status_and_rows_per_table_then_each_domain() -> None:
    lines = {(line.domain, line.table): line.as_dict() for line in summarize(STATUSES)}
    assert list(lines) == [("insurance", "insurance"), ("tpcds", "tpcds.item"), ("tpcds", "tpcds.web_sales"),
                           ("tpcds", ALL_TABLES)]  # a one-table domain has no total line
    insurance = lines["insurance", "insurance"]
    assert (insurance["files"], insurance["pending"], insurance["applied"], insurance["superseded"],
            insurance["refused"], insurance["held"]) == (4, 1, 1, 1, 1, 0)
    assert (insurance["rows_applied"], insurance["rows_superseded"], insurance["rows_quarantined"]) == (5, 3, 5)
    assert insurance["last"] == "2024-04-02T11:50:00+00:00"
    total = lines["tpcds", ALL_TABLES]
    assert (total["files"], total["applied"], total["held"], total["pending"], total["rows_applied"]) == (3, 1, 1, 1, 7)


def test_a_reverted_files_rows_count_as_applied_no_more_its_quarantined_lines_stay() -> None:
    reverted = status("raw/cdcload/e.csv", "reverted", applied=2, superseded=1, quarantined=1)
    (line,) = summarize([*STATUSES[:2], reverted])
    assert (line.files, line.applied, line.superseded, line.other) == (3, 1, 1, 1)
    assert (line.rows_applied, line.rows_superseded, line.rows_quarantined) == (5, 3, 2)


def test_the_filters_keep_pending_objects_a_table_or_domain_and_what_is_recent() -> None:
    assert [s.file for s in select(STATUSES, pending=True)] == [
        "raw/cdcload/d.csv", "raw/tpcds/web_sales/y"]  # a re-delivered object is pending too
    assert {s.table for s in select(STATUSES, tables=("tpcds",))} == {"tpcds.item", "tpcds.web_sales"}
    assert [s.file for s in select(STATUSES, tables=("tpcds.item", "insurance"), pending=True)] == [
        "raw/cdcload/d.csv"]
    recent = select(STATUSES, after=since("1h", now=NOW))
    assert [s.file for s in recent] == ["raw/cdcload/c.csv", "raw/cdcload/d.csv"]
    assert select(STATUSES, after=since("2024-04-02T11:40", now=NOW)) == [STATUSES[3]]


@pytest.mark.parametrize("text, expected", [
    ("30m", NOW - dt.timedelta(minutes=30)), ("2d", NOW - dt.timedelta(days=2)),
    ("2024-04-01", dt.datetime(2024, 4, 1, tzinfo=dt.timezone.utc)),
    ("2024-04-01T09:00+02:00", dt.datetime(2024, 4, 1, 7, tzinfo=dt.timezone.utc)),
])
def test_since_takes_a_span_back_or_an_iso_time(text: str, expected: dt.datetime) -> None:
    assert since(text, now=NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "5x", "m", ""])
def test_since_refuses_anything_else(text: str) -> None:
    with pytest.raises(ValueError):
        since(text, now=NOW)
