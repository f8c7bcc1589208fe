"""The rule both formats' restores share (core/restore_ledger.py), on a ledger history in memory.

A snapshot tree as an Iceberg table grows it: S1 <- S2 <- S3 (the objects a, b, c), a restore
to S1, then S1 <- S4 <- S5 (d, then b applied again). Each restore's reverted and reinstated
objects, in sequence order, as the rule says: an object is in a snapshot when one of its
applied entries is in that snapshot's ancestry.
"""

import dataclasses
import datetime as dt
from collections.abc import Callable

import pyarrow as pa

from lake_assets.core.ledger import APPLIED, APPROVED, LEDGER_SCHEMA, REJECTED, REVERTED, LedgerEntry
from lake_assets.core.restore_ledger import ledger_changes, derived_until

PARENT = {1: None, 2: 1, 3: 2, 4: 1, 5: 4}
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def ancestry(snapshot: int) -> set[int]:
    found: set[int] = set()
    at: int | None = snapshot
    while at is not None:
        found.add(at)
        at = PARENT[at]
    return found


def entry(name: str, status: str, snapshot: int | None, n: int, sequence: str | None) -> LedgerEntry:
    return LedgerEntry(table_name="tpcds.web_sales", source_file=name, source_etag="e", source_size=1,
                       source_kind="daily", status=status, rows_in_file=1, rows_applied=1, rows_superseded=0,
                       rows_quarantined=0, table_version=snapshot, run_id="r",
                       recorded_at=START + dt.timedelta(minutes=n), source_sequence=sequence)


def history(entries: list[LedgerEntry]) -> pa.Table:
    return pa.Table.from_pylist([dataclasses.asdict(e) for e in entries], schema=LEDGER_SCHEMA)


def restore(entries: list[LedgerEntry], snapshot: int) -> tuple[list[str], list[str]]:
    """(reverted, reinstated) objects of a restore to `snapshot`."""
    changes = ledger_changes(history(entries), contained_in(snapshot))
    return [e["source_file"] for e in changes.reverted], [e["source_file"] for e in changes.reinstated]


def contained_in(snapshot: int) -> Callable[[dict], bool]:
    inside = ancestry(snapshot)
    return lambda e: e["table_version"] is None or e["table_version"] in inside


def test_revert_then_reinstate_along_the_snapshot_tree() -> None:
    log = [entry("a", APPLIED, 1, 1, "1"), entry("c", APPLIED, 3, 3, "2"), entry("b", APPLIED, 2, 2, "3"),
           entry("x", REJECTED, None, 4, None), entry("empty", APPLIED, None, 5, None)]
    assert restore(log, 3) == ([], [])  # the current snapshot contains everything applied
    assert restore(log, 1) == (["c", "b"], [])  # in sequence order, not the order they were recorded in
    log += [entry("c", REVERTED, 3, 6, "2"), entry("b", REVERTED, 2, 7, "3"), entry("d", APPLIED, 4, 8, "4")]
    assert restore(log, 3) == (["d"], ["c", "b"])  # forward again: back in; d (on the other branch) out
    log += [entry("b", APPLIED, 5, 9, "3")]  # b applied again by `--reapply`, at S5 on S4's branch
    assert restore(log, 2) == (["d"], [])  # b's first application is in S2's ancestry: it stays applied
    assert restore(log, 1) == (["b", "d"], [])


def test_an_object_applied_again_is_back_to_the_application_the_restored_version_holds() -> None:
    """b applied at S2 (1 row superseded), reverted by a restore to S1, applied again at S5 on
    S4's branch with nothing superseded: a restore to S2 holds its first application, and
    the ledger says so (before, `lake status` kept S5's application)."""
    first = dataclasses.replace(entry("b", APPLIED, 2, 2, "3"), rows_in_file=2, rows_superseded=1)
    again = dataclasses.replace(entry("b", APPLIED, 5, 9, "3"), rows_in_file=2, rows_applied=2)
    log = [entry("a", APPLIED, 1, 1, "1"), first, entry("b", REVERTED, 2, 6, "3"), entry("d", APPLIED, 4, 8, "4"),
           again]
    changes = ledger_changes(history(log), contained_in(2))
    assert [e["source_file"] for e in changes.reverted] == ["d"] and changes.reinstated == []
    assert [(e["source_file"], e["table_version"], e["rows_applied"], e["rows_superseded"])
            for e in changes.restated] == [("b", 2, 1, 1)]
    assert not ledger_changes(history(log), contained_in(5))  # S5 holds the latest application: nothing to say
    log.append(dataclasses.replace(first, status=APPLIED, recorded_at=at(10)))  # the restore's copy of it
    assert not ledger_changes(history(log), contained_in(2)).restated  # said once


def until(entries: list[LedgerEntry], snapshot: int) -> dt.datetime | None:
    inside = ancestry(snapshot)
    return derived_until(history(entries), lambda e: e["table_version"] is None or e["table_version"] in inside)


def at(n: int) -> dt.datetime:
    return START + dt.timedelta(minutes=n)


def test_tombstones_follow_the_newest_run_the_restored_snapshot_contains() -> None:
    """The tombstones go to their version before the run or restore that followed the newest
    run the snapshot contains: back (its later runs' tombstones go) or forward (a reinstated
    run's come back), whatever restores came between. A restore's entries are as of its start;
    an approval is no run; a reinstated entry (a copy, recorded by a restore) is not its run."""
    log = [entry("a", APPLIED, 1, 1, "1"), entry("b", APPLIED, 2, 2, "2"), entry("c", APPLIED, 3, 3, "3"),
           entry("h", APPROVED, None, 4, None)]
    assert until(log, 3) is None  # the newest run: the tombstones as they are
    assert until(log, 1) == at(2)  # before b's run
    log += [entry("b", REVERTED, 2, 5, "2"), entry("c", REVERTED, 3, 5, "3"),  # a restore to S1 at minute 5
            entry("d", APPLIED, 4, 6, "4")]
    assert until(log, 3) == at(5)  # forward: as c's run left them (before the restore to S1)
    assert until(log, 2) == at(3)  # forward to S2: before c's run
    assert until(log, 1) == at(2)
    log += [entry("d", REVERTED, 4, 7, "4"), entry("b", APPLIED, 2, 7, "2"), entry("c", APPLIED, 3, 7, "3")]
    assert until(log, 3) == at(5)  # c's reinstated entry (minute 7) is not c's run
    assert until(log, 4) == at(7)  # as d's run left them
    assert until([entry("x", REJECTED, None, 1, None)], 1) == at(1)  # no run contained: before the first
