"""What happened to every file `lake run` found pending, whoever applied it.

`lake run` takes a snapshot of the pending objects of both domains before it runs; after
its runs it reads each object's fate from the ledger: applied (table version, rows),
superseded, refused, held, or still pending, and by which run (one of this command's, or
another: the sensor's, a `lake dev` run, another `lake run`). The exit code follows from
those fates, not only from this process's runs: a file a concurrent run refused is
refused all the same.
"""

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from rich.markup import escape

from lake_assets.cli.app import EXIT_FAILED, EXIT_FILES_REFUSED, EXIT_OK
from lake_assets.cli.output import console, errors
from lake_assets.core.ledger import APPLIED, HELD, REJECTED, Ledger
from lake_assets.core.raw_zone import RawObject
from lake_assets.core.tables import TableFormat, table
from lake_assets.resources.storage import LakeStorage

#: Applied files of one table and version are listed by name up to this many, else counted.
LISTED = 5


class Fate(StrEnum):
    APPLIED = "applied"
    SUPERSEDED = "superseded"  # applied, but every row was older than the table's (counted, not lost)
    REFUSED = "refused"
    HELD = "held"
    PENDING = "still pending"
    GONE = "gone"  # deleted or re-delivered (new content) before any run applied it


@dataclass(frozen=True)
class Pending:
    table_name: str  # as the ledger names it: insurance, tpcds.web_sales, ...
    obj: RawObject


@dataclass(frozen=True)
class Outcome:
    pending: Pending
    fate: Fate
    entry: dict | None  # its ledger entry, None while still pending
    ours: bool  # recorded by one of this command's runs


def pending_snapshot(storage: LakeStorage, reapply: bool = False) -> list[Pending]:
    """Every object pending in both domains now (with `reapply`, also the reverted ones)."""
    from lake_assets.core.apply.plan import pending, raw_files
    from lake_assets.core.registry import declarations
    from lake_assets.tpcds.pending import pending_objects as tpcds_pending

    ledger = Ledger(storage)
    latest = ledger.latest_by_table()
    declared = [Pending(d.table_name, f) for d in declarations()
                for f in pending(d, raw_files(d, storage), latest.get(d.table_name, {}), reapply)]
    return [*declared, *(Pending(name, o) for name, o in tpcds_pending(storage, ledger, reapply))]


def stopped_runs(storage: LakeStorage) -> set[str]:
    """The declared tables whose earlier run stopped before it cleared its stage: the next run
    finishes it (core/apply/stage.py), even with nothing pending."""
    from lake_assets.core.apply.stage import STAGING
    from lake_assets.core.registry import declarations

    return {d.table_name for d in declarations() if storage.list_objects(f"{STAGING}{d.table_name}/")}


def outcomes(storage: LakeStorage, snapshot: list[Pending], our_runs: set[str]) -> list[Outcome]:
    """The fate of each object of `snapshot`, from the ledger's latest entry of its (key, ETag)."""
    latest = Ledger(storage).latest_by_table()
    found = []
    for item in snapshot:
        entry = latest.get(item.table_name, {}).get((item.obj.key, item.obj.etag))
        fate = _fate(entry)
        if fate is Fate.PENDING and entry is None and not _still_there(storage, item.obj):
            fate = Fate.GONE
        found.append(Outcome(item, fate, entry, entry is not None and entry["run_id"] in our_runs))
    return found


def _still_there(storage: LakeStorage, obj: RawObject) -> bool:
    """True if the raw zone still holds `obj` with the same content (ETag)."""
    listed = [o for o in storage.list_objects(obj.key) if o["Key"] == obj.key]
    return any(o["ETag"].strip('"') == obj.etag for o in listed)


def _fate(entry: dict | None) -> Fate:
    if entry is None:
        return Fate.PENDING
    status = entry["status"]
    if status == APPLIED:
        superseded = not entry["rows_applied"] and entry["rows_superseded"]
        return Fate.SUPERSEDED if superseded else Fate.APPLIED
    return {REJECTED: Fate.REFUSED, HELD: Fate.HELD}.get(status, Fate.PENDING)  # approved, reverted: waiting


def exit_code(found: list[Outcome], runs_ok: bool) -> int:
    """README's contract: 1 if a run or blocking check failed or a file is left pending;
    3 if a file was refused (by any run); else 0."""
    if not runs_ok or any(o.fate is Fate.PENDING for o in found):
        return EXIT_FAILED
    return EXIT_FILES_REFUSED if any(o.fate is Fate.REFUSED for o in found) else EXIT_OK


def report(found: list[Outcome], describe_run: Callable[[str], str]) -> None:
    """One line per file that was not simply applied by this command; applied files grouped
    per table and version. `describe_run(run_id)` names another run (e.g. the sensor's)."""
    groups: dict[tuple[str, int | None, bool], list[Outcome]] = {}
    for outcome in found:
        if outcome.fate is Fate.APPLIED:
            key = (outcome.pending.table_name, outcome.entry["table_version"], outcome.ours)
            groups.setdefault(key, []).append(outcome)
    for (name, version, _), applied in groups.items():
        files = ", ".join(o.pending.obj.key for o in applied) if len(applied) <= LISTED else f"{len(applied)} files"
        rows = sum(o.entry["rows_applied"] or 0 for o in applied)
        console.print(escape(f"applied: {files} -> {name} {_version_word(name)} {version} ({rows} rows)")
                      + _by(applied[0], describe_run))
    for outcome in found:
        entry, key = outcome.entry, escape(outcome.pending.obj.key)
        if outcome.fate is Fate.SUPERSEDED:
            console.print(f"superseded: {key}: its {entry['rows_superseded']} row(s) were older than the table's"
                          f"{_by(outcome, describe_run)}")
        elif outcome.fate is Fate.HELD:
            console.print(f"[yellow]held:[/yellow] {key}: {escape(entry['detail'] or '')} (`lake approve`)"
                          f"{_by(outcome, describe_run)}")
        elif outcome.fate is Fate.REFUSED:
            errors.print(f"[red]refused:[/red] {key}: {escape(entry['detail'] or 'whole file rejected')}"
                         f"{_by(outcome, describe_run)}; see `lake status`")
        elif outcome.fate is Fate.PENDING:
            errors.print(f"[red]still pending:[/red] {key} ({outcome.pending.table_name}); see `lake status`")
        elif outcome.fate is Fate.GONE:
            console.print(f"gone: {key} was deleted or re-delivered before a run applied it (see `lake status`)")


def _version_word(table_name: str) -> str:
    """How the ledger's table (a declared table's name, or one of the lake's own) numbers its versions."""
    return "snapshot" if table(table_name).format is TableFormat.ICEBERG else "version"


def _by(outcome: Outcome, describe_run: Callable[[str], str]) -> str:
    """Who recorded the outcome, unless it was this command (markup-escaped)."""
    if outcome.ours:
        return ""
    return escape(f"; by another run ({describe_run(outcome.entry['run_id'])})")
