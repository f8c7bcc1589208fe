"""What became of every raw object, per table and domain: `lake status`'s answer (no Dagster, no engine).

One `FileStatus` per object of the raw zone, from one listing of each table's raw prefixes and
the ledger's latest entry of its (key, ETag): pending, applied (rows applied, superseded,
quarantined), rejected, held, approved, reverted or ignored, with why. `summarize` counts them
per table and per domain. The same function answers `lake status` in a command of its own
and in `lake dev`'s process (cli/dev_status.py), so both answers are the same.
"""

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from typing import TYPE_CHECKING, Any

from lake_assets.core.ledger_states import APPLIED, APPROVED, HELD, REJECTED, REVERTED
from lake_assets.core.raw_zone import IGNORED, is_data_file

if TYPE_CHECKING:
    from lake_assets.resources.storage import LakeStorage

#: The ledger's latest entries: table name -> (key, ETag) -> entry (`Ledger.latest_by_table`).
LatestEntries = Mapping[str, Mapping[tuple[str, str], dict]]

PENDING = "pending"
REDELIVERED = "pending (re-delivered)"
TPCDS_DOMAIN = "tpcds"


@dataclass(frozen=True)
class FileStatus:
    """One raw object and what became of it (the JSON keys of `lake status --format json`)."""

    file: str
    bytes: int
    status: str
    version: int | None
    rows: int | None
    applied: int | None
    superseded: int | None
    quarantined: int | None
    detail: str | None
    table: str  # as the ledger names it: insurance, tpcds.web_sales, ...
    domain: str
    at: str | None  # ISO time: when its latest ledger entry was recorded, else when it landed

    @property
    def pending(self) -> bool:
        return self.status.startswith(PENDING)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "FileStatus":
        fields: dict[str, Any] = {name: values.get(name) for name in cls.__dataclass_fields__}
        return cls(**fields)


def file_statuses(storage: "LakeStorage", latest: LatestEntries) -> list[FileStatus]:
    """Every raw object of every declared table and of the TPC-DS star, in table order then key order."""
    from lake_assets.core.registry import declarations

    found: list[FileStatus] = []
    for declaration in declarations():
        entries = latest.get(declaration.table_name, {})
        for source in declaration.sources:
            for obj in storage.list_objects(source.prefix):
                if is_data_file(obj["Key"], source.suffix):
                    found.append(_status(obj, entries, declaration.table_name, declaration.group))
                else:
                    found.append(_ignored(obj, declaration.table_name, declaration.group,
                                          f"not a {source.suffix} file: never applied"))
    return found + _tpcds_statuses(storage, latest)


def _tpcds_statuses(storage: "LakeStorage", latest: LatestEntries) -> list[FileStatus]:
    """The TPC-DS raw objects, against the ledger of the table each one feeds."""
    from lake_assets.core.raw_zone import RawObject
    from lake_assets.tpcds.layout import fact_layout
    from lake_assets.tpcds.schema import DECLARATIONS, DIMENSIONS, RAW

    listed = storage.list_objects(RAW.root)  # one listing: the fact layout is judged from it too
    facts = [RawObject(o["Key"], o["ETag"].strip('"'), int(o["Size"])) for o in listed if o["Key"].startswith(RAW.facts)]
    refused = fact_layout(storage, facts).refused
    on_core = {DECLARATIONS[d].table_name: DECLARATIONS[d] for d in DIMENSIONS}  # the change core's rules
    found = []
    for obj in listed:
        name = RAW.table_of(obj["Key"])
        if name is None:
            continue
        source = on_core[name].source(obj["Key"]) if name in on_core else None
        if obj["Key"] in refused:  # by its place in the raw zone, whatever its content: never loaded as it lies
            found.append(_ignored(obj, name, TPCDS_DOMAIN, refused[obj["Key"]]))
        elif source is not None and not is_data_file(obj["Key"], source.suffix):
            found.append(_ignored(obj, name, TPCDS_DOMAIN, f"not a {source.suffix} file: never applied"))
        else:
            found.append(_status(obj, latest.get(name, {}), name, TPCDS_DOMAIN))
    return found


def _ignored(obj: dict, table: str, domain: str, why: str) -> FileStatus:
    return FileStatus(obj["Key"], int(obj["Size"]), IGNORED, None, None, None, None, None, why, table, domain,
                      _iso(obj.get("LastModified")))


def _status(obj: dict, latest: Mapping[tuple[str, str], dict], table: str, domain: str) -> FileStatus:
    """The status of one raw object, from the latest ledger entries of the table it feeds."""
    key, size = obj["Key"], int(obj["Size"])
    entry = latest.get((key, obj["ETag"].strip('"')))
    if entry is None:
        redelivered = any(seen == key for seen, _ in latest)
        return FileStatus(key, size, REDELIVERED if redelivered else PENDING, None, None, None, None, None, None,
                          table, domain, _iso(obj.get("LastModified")))
    detail = entry["detail"]
    if entry["status"] == HELD:
        detail = f"{detail}; publish it with `lake approve {key}`"
    elif entry["status"] == APPROVED:
        detail = f"{detail}; published by the next run"
    elif entry["status"] == REVERTED:
        detail = f"{detail}; apply it again with `lake run --reapply`"
    return FileStatus(key, size, entry["status"], entry["table_version"], entry["rows_in_file"],
                      entry["rows_applied"], entry["rows_superseded"], entry["rows_quarantined"], detail, table,
                      domain, _iso(entry["recorded_at"]))


def _iso(when: dt.datetime | None) -> str | None:
    return when.astimezone(dt.timezone.utc).isoformat(timespec="seconds") if when is not None else None


@dataclass
class TableSummary:
    """Counts of one table's raw objects by status, and their rows (a domain's: `table` is "all")."""

    domain: str
    table: str
    files: int = 0
    pending: int = 0
    applied: int = 0
    superseded: int = 0  # applied, every row older than the table's
    refused: int = 0
    held: int = 0
    other: int = 0  # approved (published by the next run), reverted, ignored
    rows_applied: int = 0
    rows_superseded: int = 0
    rows_quarantined: int = 0
    last: str | None = None  # the newest ledger entry or landing
    _tables: set[str] = field(default_factory=set, repr=False)

    def add(self, status: FileStatus) -> None:
        self.files += 1
        if status.pending:
            self.pending += 1
        elif status.status == APPLIED and not status.applied and status.superseded:
            self.superseded += 1
        elif status.status == APPLIED:
            self.applied += 1
        elif status.status == REJECTED:
            self.refused += 1
        elif status.status == HELD:
            self.held += 1
        else:
            self.other += 1
        if status.status == APPLIED:  # a file reverted by a restore: its rows are in the table no more
            self.rows_applied += status.applied or 0
            self.rows_superseded += status.superseded or 0
        self.rows_quarantined += status.quarantined or 0  # the quarantine keeps every refused line
        if status.at is not None and (self.last is None or status.at > self.last):
            self.last = status.at

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if not k.startswith("_")}


#: The `table` of a domain's total line.
ALL_TABLES = "all"


def summarize(statuses: list[FileStatus]) -> list[TableSummary]:
    """One line per table, in the order they come, each domain's tables followed by the domain's total
    (when the domain has more than one table)."""
    tables: dict[str, TableSummary] = {}
    for status in statuses:
        tables.setdefault(status.table, TableSummary(status.domain, status.table)).add(status)
    lines: list[TableSummary] = []
    for domain in dict.fromkeys(t.domain for t in tables.values()):
        members = [t for t in tables.values() if t.domain == domain]
        lines += members
        if len(members) > 1:
            total = TableSummary(domain, ALL_TABLES)
            for status in statuses:
                if status.domain == domain:
                    total.add(status)
            lines.append(total)
    return lines


def since(text: str, now: dt.datetime | None = None) -> dt.datetime:
    """The time `--since` names: an ISO date or time (UTC unless it says otherwise), or a span
    back from now (`30m`, `2h`, `1d`, `45s`). Raises ValueError for anything else."""
    now = now or dt.datetime.now(dt.timezone.utc)
    spans = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
    amount, unit = text[:-1], text[-1:].lower()
    if unit in spans and amount.isdigit():
        return now - dt.timedelta(**{spans[unit]: int(amount)})
    when = dt.datetime.fromisoformat(text)
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def select(statuses: list[FileStatus], *, pending: bool = False, tables: tuple[str, ...] = (),
           after: dt.datetime | None = None) -> list[FileStatus]:
    """The statuses `lake status`'s filters keep: only pending objects; only these tables (an Iceberg
    table by its name in its namespace too, `orders` for `shop.orders`; a domain's name takes its
    tables); only what was recorded or landed at or after `after`."""
    chosen = statuses
    if pending:
        chosen = [s for s in chosen if s.pending]
    if tables:
        chosen = [s for s in chosen if {s.table, s.table.rpartition(".")[2], s.domain} & set(tables)]
    if after is not None:
        chosen = [s for s in chosen if s.at is not None and dt.datetime.fromisoformat(s.at) >= after]
    return chosen
