"""`lake status` as a user reads it, and the promise it makes: every raw row is accounted for."""

import json

from lake_assets_tests.helpers.cli import lake

#: Statuses whose rows went through a run: applied (or reverted by a restore after), each row
#: applied, superseded or quarantined.
RUN = ("applied", "reverted")


def status() -> dict[str, dict]:
    """Every raw object's `lake status` line (JSON), by key."""
    code, out = lake("status", "--format", "json")
    assert code == 0, out
    return {row["file"]: row for row in json.loads(out)}


def assert_every_row_accounted(rows: dict[str, dict]) -> None:
    """No object left pending, and each one's rows accounted for: applied, superseded or
    quarantined by a run; waiting for `lake approve` (held: nothing applied yet, with why); or
    refused whole with why (its records quarantined, or, for bytes that are not text, none read)."""
    for row in rows.values():
        assert not row["status"].startswith("pending"), row
        if row["status"] in RUN:
            assert row["rows"] == row["applied"] + row["superseded"] + row["quarantined"], row
        elif row["status"] == "held":
            assert row["rows"] is not None and (row["applied"], row["superseded"]) == (0, 0) and row["detail"], row
        else:  # refused whole, by the ledger or by where it lies
            assert row["detail"] and row["applied"] in (0, None), row
            assert row["rows"] is None or row["rows"] == row["quarantined"], row
