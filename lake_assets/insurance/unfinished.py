"""The record of an insurance run between its table commit and its ledger write.

A run's derived writes (tombstones, SCD2 history, ledger; the feed is derived from the log
anyway) come after its table commit, and they are computed from what the run found: the
table at the version before its commit. A rerun that started from the committed version
instead would no longer see the rows the commit removed (a snapshot's implied deletes, a
CDC delete), so it could not write their tombstones and history. So, just before its table
commit, a run writes this record: its id, its start, the version it found and the raw
objects (key, ETag) it read. The record is removed once the ledger is written.

The next run finishes such a run first (pipeline.py): when the table's newest apply commit
has no ledger entry and no RESTORE came after it, the newest record whose run found the
version just before that commit is the run that made it. The same objects are resolved
again against that version, with the same start, so the same changes, tombstones, history
rows and ledger counts come out, recorded at the committed version (no second table commit).
Records of runs that never committed (killed before their commit) or that finished (killed
after their ledger write) are dropped.
"""

import datetime as dt
import json
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from lake_assets.insurance import merge
from lake_assets.resources.storage import LakeStorage

#: Beside the staged batches (which every run clears), not under them.
UNFINISHED = "staging/insurance-unfinished/"
#: The lake's names of its table commits (pipeline._label): which commits a run made.
_APPLY_COMMIT = re.compile(rf"(full load|merge) \(({'|'.join(s.value for s in merge.Strategy)})\)")
_RESTORE = "RESTORE"


@dataclass(frozen=True)
class Unfinished:
    run_id: str
    applied_at: dt.datetime
    version_before: int | None  # the table's version the run found (None: no table yet)
    files: list[tuple[str, str]]  # (key, ETag) of every raw object it read

    @property
    def key(self) -> str:
        return f"{UNFINISHED}{self.run_id}.json"

    def to_json(self) -> bytes:
        return json.dumps({"run_id": self.run_id, "applied_at": self.applied_at.isoformat(),
                           "version_before": self.version_before, "files": self.files}).encode()

    @staticmethod
    def from_json(data: bytes) -> "Unfinished":
        record = json.loads(data)
        return Unfinished(record["run_id"], dt.datetime.fromisoformat(record["applied_at"]), record["version_before"],
                          [(key, etag) for key, etag in record["files"]])


def begin(storage: LakeStorage, run: Unfinished) -> None:
    """Record the run before its table commit."""
    storage.put_bytes(run.key, run.to_json())


def end(storage: LakeStorage, run_id: str) -> None:
    """Remove the run's record once its ledger is written."""
    storage.delete_prefix(f"{UNFINISHED}{run_id}.json")


def to_finish(storage: LakeStorage, delta: DeltaTable | None, ledger: pa.Table) -> tuple[Unfinished, int] | None:
    """The run that committed the table's newest apply commit without recording it in the
    ledger (`ledger`: the table's entries), and that commit's version; other records are
    dropped (see the module docstring). Reads the table's history only when a record exists."""
    records = [Unfinished.from_json(storage.get_bytes(o["Key"])[0]) for o in storage.list_objects(UNFINISHED)]
    if not records:
        return None
    committed = _newest_apply_commit(delta) if delta is not None else None
    found = None
    if committed is not None and not pc.any(pc.equal(ledger["table_version"], committed)).as_py():
        made_it = [r for r in records if (-1 if r.version_before is None else r.version_before) == committed - 1]
        found = max(made_it, key=lambda r: r.applied_at, default=None)
    for record in records:
        if record is not found:
            end(storage, record.run_id)
    return None if found is None or committed is None else (found, committed)


def _newest_apply_commit(delta: DeltaTable) -> int | None:
    """The version of the newest commit a run made, unless a RESTORE came after it."""
    for commit in delta.history():  # newest first
        if commit.get("operation") == _RESTORE:
            return None
        if _APPLY_COMMIT.fullmatch(commit.get("userMetadata") or ""):
            return int(commit["version"])
    return None
