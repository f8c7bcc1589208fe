"""What a run will read, and where each object sits on the table's sequence axis: metadata only.

This is the orchestrator's part of a run. From the raw zone's listing and the table's ledger it
decides which objects are pending, which delivery of its key each is, and the sequence of its
rows (core/sequence.py: a CDC file's DMS time from its name or date folders; a snapshot's
stamp from its name or, without one, as of its arrival), and groups a multi-part full load
(`LOAD00000001.csv`, `LOAD00000002.csv`, ...) into one snapshot. It reads no object's bytes and
holds no row: the engine reads the objects (reader.py).
"""

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import numpy as np

from lake_assets.core.apply.layout import object_refusal, snapshot_group
from lake_assets.core.apply.partitions import FolderPartition, folder_partition
from lake_assets.core.apply.reader import ObjectToRead
from lake_assets.core.declaration import RefusalReason, SequenceFrom, Source, SourceKind, TableDeclaration
from lake_assets.core.dms import DmsLayout
from lake_assets.core.ledger import APPLIED, APPROVED, HELD, REJECTED, REVERTED, Ledger
from lake_assets.core.raw_zone import RawObject, is_data_file
from lake_assets.core.sequence import TIME_DIGITS, FileStamp, arrival_stamp, file_stamp, folder_pattern, name_part, \
    origin
from lake_assets.resources.storage import LakeStorage
#: The ledger's name for each kind of source (`source_kind`; `lake status` shows it).
LEDGER_KIND = {SourceKind.SNAPSHOT: "fullload", SourceKind.CDC: "cdcload"}


@dataclass(frozen=True)
class RawFile(RawObject):
    """A raw data object of a declared table, and the kind of source it landed in."""

    kind: SourceKind


def raw_files(declaration: TableDeclaration, storage: LakeStorage) -> list[RawFile]:
    """Every raw data object of the table: its sources in declared order, each in key order."""
    return [RawFile(o["Key"], o["ETag"].strip('"'), int(o["Size"]), source.kind)
            for source in declaration.sources for o in storage.list_objects(source.prefix)
            if is_data_file(o["Key"], source.suffix)]


def pending(declaration: TableDeclaration, files: list[RawFile], latest: dict[tuple[str, str], dict],
            reapply: bool = False, reload: Collection[str] = ()) -> list[RawFile]:
    """Objects whose (key, ETag) has no ledger entry yet, or was approved after a hold, or (with
    `reapply`) reverted by `lake restore`, or refused for columns a newer contract now declares,
    or refused by a place the declaration now names a partition by (`refused_by_place_now_named`),
    or snapshot objects applied and named in `reload` (`lake backfill`: loaded again as of their stamps)."""
    again = (APPROVED, REVERTED) if reapply else (APPROVED,)
    return [f for f in files if (f.key, f.etag) not in latest or latest[(f.key, f.etag)]["status"] in again
            or refused_by_older_contract(declaration, latest[(f.key, f.etag)])
            or refused_by_place_now_named(declaration, latest[(f.key, f.etag)])
            or (f.kind is SourceKind.SNAPSHOT and f.key in reload and latest[(f.key, f.etag)]["status"] == APPLIED)]


def newest_snapshots(declaration: TableDeclaration, files: list[RawFile],
                     latest: dict[tuple[str, str], dict]) -> dict[Any, list[RawFile]]:
    """Per partition of a partition snapshot source (its value), or for the table (None), the
    objects of its newest applied snapshot still in the raw zone as applied (a multi-part full
    load's parts together): what `lake backfill` loads again."""
    newest: dict[Any, tuple[str, str, str]] = {}  # partition -> its newest part's (sequence, time, group)
    applied: list[tuple[Any, str, str, RawFile]] = []
    for raw in files:
        entry = latest.get((raw.key, raw.etag))
        source = declaration.source(raw.key)
        if raw.kind is not SourceKind.SNAPSHOT or entry is None or entry["status"] != APPLIED or source is None \
                or entry["source_sequence"] is None:
            continue
        partition = None if source.partition is None else folder_partition(declaration, source, raw.key)
        value = partition.value if isinstance(partition, FolderPartition) else None
        sequence = entry["source_sequence"]
        time, group = FileStamp.parse(sequence).time, snapshot_group(raw.key)
        applied.append((value, time, group, raw))
        newest[value] = max(newest.get(value, ("", "", "")), (sequence, time, group))
    found: dict[Any, list[RawFile]] = {}
    for value, time, group, raw in applied:  # the newest part's load: its group's parts of the same time
        if newest[value][1:] == (time, group):
            found.setdefault(value, []).append(raw)
    return found


def applied_snapshots(declaration: TableDeclaration, storage: LakeStorage) -> dict[Any, list[RawFile]]:
    """`newest_snapshots` of the table as its raw zone and ledger hold them now."""
    entries = Ledger(storage).entries(declaration.table_name).to_pylist()
    latest = {(e["source_file"], e["source_etag"]): e for e in entries}
    return newest_snapshots(declaration, raw_files(declaration, storage), latest)


def refused_by_older_contract(declaration: TableDeclaration, entry: dict) -> bool:
    """A file refused for columns no contract declared is pending again once a newer contract
    version is declared (the refusal names the version it was checked against)."""
    if entry["status"] != REJECTED or not (entry["detail"] or "").startswith(RefusalReason.UNDECLARED_COLUMN.value):
        return False
    checked = re.search(r"contract v([0-9]+)", entry["detail"])
    return checked is not None and int(checked.group(1)) < declaration.contract.version


def refused_by_place_now_named(declaration: TableDeclaration, entry: dict) -> bool:
    """A partition snapshot refused whole by its place (`wrong_partition`: a day outside the table's
    daily partitions, say) is pending again once the declaration names its folder's partition (the
    daily partitions widened)."""
    if entry["status"] != REJECTED or not (entry["detail"] or "").startswith(RefusalReason.WRONG_PARTITION.value):
        return False
    source = declaration.source(entry["source_file"])
    return source is not None and source.partition is not None and \
        isinstance(folder_partition(declaration, source, entry["source_file"]), FolderPartition)


@dataclass
class PlannedFile:
    """One pending object: what the engine reads, and where its rows sit in sequence."""

    file: RawFile
    index: int
    delivery: int
    stamp: FileStamp | None = None
    refusal: str | None = None  # "reason: detail" when its name refuses it
    approved: str | None = None  # the sequence it was held with, once approved
    group: str | None = None  # a snapshot's group (snapshot_group)
    floor: str | None = None  # a snapshot's "as of": the base of its stamp

    @property
    def prefix(self) -> str | None:
        """The sequence of its rows without their record number."""
        if self.stamp is None:
            return None
        return self.stamp.base(self.delivery)[:-10]

    def to_read(self) -> ObjectToRead:
        return ObjectToRead(self.index, self.file.key, self.file.kind, self.prefix, self.refusal, self.file.size)


@dataclass
class Plan:
    files: list[PlannedFile]
    #: the snapshots of the run, oldest first: group -> its parts
    snapshots: dict[str, list[PlannedFile]] = field(default_factory=dict)
    #: the stamp of the newest applied snapshot before this run (older changes to keys it removed lose)
    floor: str | None = None
    #: with partition snapshots, each partition's floor instead (partitions.py): its value -> stamp
    partition_floors: dict[Any, str] = field(default_factory=dict)

    @property
    def changes(self) -> list[PlannedFile]:
        return [f for f in self.files if f.file.kind is SourceKind.CDC]


def plan(declaration: TableDeclaration, files: list[RawFile], history: pa.Table, dms: DmsLayout,
         reload: Collection[str] = ()) -> Plan:
    """Stamp the pending `files` against the table's ledger `history` (its entries, oldest first);
    an object approved, reverted or loaded again (`reload`) keeps the stamp it was applied with."""
    latest = _latest(history)
    deliveries = _deliveries(history)
    approved = {(e["source_file"], e["source_etag"]): e["source_sequence"] for e in latest.to_pylist()
                if e["status"] in (APPROVED, REVERTED) or (e["status"] == APPLIED and e["source_file"] in reload)}
    folders = folder_pattern(dms.folder_date_format)
    planned = []
    for index, raw in enumerate(files):
        delivery = len(deliveries.get(raw.key, set()) - {raw.etag}) + 1
        source = declaration.source(raw.key)
        relative = raw.key.removeprefix(source.prefix) if source else raw.key
        entry = PlannedFile(raw, index, delivery, approved=approved.get((raw.key, raw.etag)))
        stamp = None if _by_arrival(source) else file_stamp(relative, folders)
        if stamp is None and declaration.sequence_by is not None and raw.kind is SourceKind.CDC:
            stamp = FileStamp("0" * TIME_DIGITS)  # its rows' column orders them; the name only breaks ties
        entry.stamp = None if stamp is None else stamp.of(raw.key)
        refused = object_refusal(source, raw.key, dms, declaration.sequence_by is None) if source else None
        if refused is not None:
            entry.refusal = f"{refused.reason.value}: {refused.detail}"
        elif source is not None and source.partition is not None:
            partition = folder_partition(declaration, source, raw.key)
            if isinstance(partition, str):
                entry.refusal = f"{RefusalReason.WRONG_PARTITION.value}: {partition}"
        planned.append(entry)
    scoped = declaration.partition_snapshots is not None
    result = Plan(planned, floor=None if scoped else _floor(latest),
                  partition_floors=_partition_floors(declaration, latest) if scoped else {})
    newest = _newest(latest)
    result.snapshots = _snapshots([f for f in planned if f.file.kind is SourceKind.SNAPSHOT], newest,
                                  _published_parts(latest), dated=declaration.timed)
    _stamp_arrivals(declaration, planned, newest)
    return result


def _by_arrival(source: Source | None) -> bool:
    return source is not None and source.sequence_from is SequenceFrom.ARRIVAL


def _stamp_arrivals(declaration: TableDeclaration, planned: list[PlannedFile], newest_applied: str | None) -> None:
    """Stamp the CDC files of a source ordered by arrival: after every file applied or held before,
    and after the snapshots arriving with them (the changes apply on top of a full load landed in
    the same run), one after another in key order."""
    newest = max([newest_applied or "", *(f.floor or "" for f in planned if f.file.kind is SourceKind.SNAPSHOT)])
    for entry in planned:
        if entry.file.kind is SourceKind.CDC and entry.refusal is None and \
                _by_arrival(declaration.source(entry.file.key)):
            stamp = arrival_stamp(newest or None)
            entry.stamp = stamp.of(entry.file.key)
            newest = stamp.base(0)


@dataclass(frozen=True)
class _Published:
    """The newest load of a multi-part full load's folder (DMS's `LOAD*.csv`) with parts applied:
    the sequence it was published with, and the keys of its parts."""

    sequence: str
    keys: frozenset[str]


def _published_parts(latest: pa.Table) -> dict[str, _Published]:
    """Per folder of multi-part full loads, its newest load's `_Published` (a reload's parts
    delivered again belong to it, not to the load they replaced)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for entry in latest.to_pylist():
        group = snapshot_group(entry["source_file"])
        if group == entry["source_file"] or entry["status"] != APPLIED or \
                entry["source_kind"] != LEDGER_KIND[SourceKind.SNAPSHOT] or entry["source_sequence"] is None:
            continue
        found.setdefault(group, []).append((entry["source_sequence"], entry["source_file"]))
    newest = {group: max(sequence for sequence, _ in parts) for group, parts in found.items()}
    return {group: _Published(newest[group], frozenset(key for sequence, key in parts if sequence == newest[group]))
            for group, parts in found.items()}


def _snapshots(files: list[PlannedFile], newest_applied: str | None,
               published: dict[str, _Published] | None = None, dated: bool = True) -> dict[str, list[PlannedFile]]:
    """Group snapshot files into snapshots and stamp them (see core/sequence.py): with the stamp
    they were held with, once approved; a later part of a multi-part load whose other parts a
    run applied before (DMS writes the parts one after another; the sensor may start a run
    between them) with theirs: the same snapshot, so it deletes none of their keys (a part
    delivered again is a new load); else with the earliest time their names or folders give
    (`dated`: changes are ordered by time; a counter's axis, an LSN's, is not a date's); else as of
    their arrival (after `newest_applied`, the newest file applied or held before;
    snapshots arriving together follow each other in key order). A part's rows carry its part
    number."""
    groups: dict[str, list[PlannedFile]] = {}
    for entry in files:
        groups.setdefault(snapshot_group(entry.file.key), []).append(entry)
    stamped = []
    for group, parts in sorted(groups.items()):
        held = [p.approved for p in parts if p.approved is not None]
        named = [p.stamp.time for p in parts if p.stamp is not None]
        earlier = (published or {}).get(group)
        if held:
            stamp = FileStamp.parse(min(held))
        elif earlier is not None and not any(p.file.key in earlier.keys for p in parts):
            stamp = FileStamp.parse(earlier.sequence)
        elif dated and len(named) == len(parts):
            stamp = FileStamp(min(named))
        else:
            stamp = arrival_stamp(newest_applied)
            newest_applied = stamp.base(0)
        for entry in parts:
            part = stamp.part
            if group != entry.file.key and stamp.part == 0:  # DMS's parts, in the order of their hex counters
                part = name_part(entry.file.key.rpartition("/")[2].rsplit(".", 1)[0])
            entry.stamp = FileStamp(stamp.time, part, origin(entry.file.key))
            entry.floor = stamp.base(0)
            entry.group = group
        stamped.append((stamp.base(0), group, parts))
    return {group: parts for _, group, parts in sorted(stamped, key=lambda s: s[0])}


def _latest(history: pa.Table) -> pa.Table:
    """Each (key, ETag)'s latest ledger entry: its state now."""
    if not history.num_rows:
        return history
    position = pa.array(np.arange(history.num_rows), pa.int64())
    newest = history.select(["source_file", "source_etag"]).append_column("_position", position) \
        .group_by(["source_file", "source_etag"]).aggregate([("_position", "max")])
    return history.take(newest["_position_max"])


def _newest(latest: pa.Table) -> str | None:
    """The sequence of the newest file applied, held or reverted so far (a snapshot arriving now
    follows it; a reverted file still counts: it arrived before)."""
    if not latest.num_rows:
        return None
    seen = latest.filter(pc.is_in(latest["status"], pa.array([APPLIED, HELD, APPROVED, REVERTED])))
    return pc.max(seen["source_sequence"]).as_py() if seen.num_rows else None


def _deliveries(history: pa.Table) -> dict[str, set[str]]:
    """Every ETag seen under each key: the next new content is delivery len(...) + 1."""
    seen: dict[str, set[str]] = {}
    for key, etag in zip(history["source_file"].to_pylist(), history["source_etag"].to_pylist()):
        seen.setdefault(key, set()).add(etag)
    return seen


def _floor(latest: pa.Table) -> str | None:
    """The stamp of the newest applied snapshot (a snapshot reverted by `lake restore` no longer counts)."""
    if not latest.num_rows:
        return None
    applied = latest.filter(pc.and_(pc.equal(latest["status"], APPLIED),
                                    pc.equal(latest["source_kind"], LEDGER_KIND[SourceKind.SNAPSHOT])))
    return pc.max(applied["source_sequence"]).as_py() if applied.num_rows else None


def _partition_floors(declaration: TableDeclaration, latest: pa.Table) -> dict[Any, str]:
    """Per partition, the stamp of its newest applied partition snapshot."""
    floors: dict[Any, str] = {}
    if not latest.num_rows:
        return floors
    for entry in latest.to_pylist():
        source = declaration.source(entry["source_file"])
        if entry["status"] != APPLIED or source is None or source.partition is None or \
                entry["source_sequence"] is None:
            continue
        partition = folder_partition(declaration, source, entry["source_file"])
        if isinstance(partition, FolderPartition):
            floors[partition.value] = max(floors.get(partition.value, ""), entry["source_sequence"])
    return floors
