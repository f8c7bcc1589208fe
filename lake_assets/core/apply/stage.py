"""A run's staging area: what the engine computed once and the run's record of its commit.

Sail has no effective `persist`, so a frame several steps read (the parsed objects, the resolved
change set) is written once as Parquet under `staging/<table>/<run id>/` and read back.

Just before its table commit a run writes its manifest there: the version it found, its commit's
label, the moment it applied, and its ledger entries. Everything after the commit (the change
feed, tombstones, SCD2 history, ledger) is computed from the staged change set and that found
version, so a run killed anywhere after its commit is finished by the next run from its stage
(`Stage.unfinished`): the same rows, recorded at the committed version, and no second commit.
A run killed before its commit left only a stage, which the next run removes: its objects are
still pending. The stage is removed once the ledger is written.
"""

import datetime as dt
import json
from dataclasses import asdict, dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from lake_assets.core.ledger import LedgerEntry
from lake_assets.resources.storage import LakeStorage

STAGING = "staging/"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Manifest:
    """What a run was about to commit, and what it would record once it had."""

    run_id: str
    applied_at: dt.datetime
    version_before: int | None
    label: str
    entries: list[LedgerEntry]  # with table_version set to VERSION_PENDING where the commit's version goes
    #: the files whose entries take the commit's version (the rest keep theirs)
    committing: list[str]

    def to_json(self) -> bytes:
        entries = [{**asdict(e), "recorded_at": e.recorded_at.isoformat()} for e in self.entries]
        return json.dumps({"run_id": self.run_id, "applied_at": self.applied_at.isoformat(),
                           "version_before": self.version_before, "label": self.label, "entries": entries,
                           "committing": self.committing}).encode()

    @staticmethod
    def from_json(data: bytes) -> "Manifest":
        record = json.loads(data)
        entries = [LedgerEntry(**{**e, "recorded_at": dt.datetime.fromisoformat(e["recorded_at"])})
                   for e in record["entries"]]
        return Manifest(record["run_id"], dt.datetime.fromisoformat(record["applied_at"]),
                        record["version_before"], record["label"], entries, record["committing"])


class Stage:
    """The staging area of one run of one table."""

    def __init__(self, storage: LakeStorage, table: str, run_id: str) -> None:
        self.storage, self.table, self.run_id = storage, table, run_id
        self.prefix = f"{STAGING}{table}/{run_id}/"

    def write(self, name: str, frame: DataFrame) -> DataFrame:
        """`frame` written once (Parquet) and read back (with its schema: an empty frame writes no file)."""
        uri = self.storage.uri(f"{self.prefix}{name}/")
        frame.write.mode("overwrite").parquet(uri)
        self.storage.put_bytes(f"{self.prefix}{name}.schema.json", frame.schema.json().encode())
        return frame.sparkSession.read.schema(frame.schema).parquet(uri)

    def read(self, spark: SparkSession, name: str) -> DataFrame:
        """A frame staged by `write` (a stopped run's, read by the run that finishes it)."""
        schema = StructType.fromJson(json.loads(self.storage.get_bytes(f"{self.prefix}{name}.schema.json")[0]))
        return spark.read.schema(schema).parquet(self.storage.uri(f"{self.prefix}{name}/"))

    def record(self, manifest: Manifest) -> None:
        self.storage.put_bytes(f"{self.prefix}{MANIFEST}", manifest.to_json())

    def manifest(self) -> Manifest | None:
        key = f"{self.prefix}{MANIFEST}"
        if not self.storage.list_objects(key):  # no manifest: the run never reached its commit
            return None
        return Manifest.from_json(self.storage.get_bytes(key)[0])

    def clear(self) -> None:
        self.storage.delete_prefix(self.prefix)

    @staticmethod
    def left_behind(storage: LakeStorage, table: str) -> list["Stage"]:
        """The stages earlier runs of `table` left (killed, or failed before clearing them)."""
        runs = {o["Key"].removeprefix(f"{STAGING}{table}/").split("/", 1)[0]
                for o in storage.list_objects(f"{STAGING}{table}/")}
        return [Stage(storage, table, run) for run in sorted(runs) if run]
