"""The curated table a run commits to, Delta or Iceberg: the questions the change core asks of it.

A run (run.py) opens the table as it finds it, reads it at that version, counts its rows, adds
the columns of newer contract versions, commits its resolved batch in ONE commit, and, when a run
was stopped after its commit, asks whether that commit landed. `DeltaCurated` answers from the
Delta log (delta-rs) and commits by commit.py's strategies; `IcebergCurated` (curated_iceberg.py)
answers from the REST catalog (pyiceberg) and commits with Sail's Iceberg writes. Everything kept
beside the table (quarantine, tombstones, history, ledger) is Delta for both: bookkeeping, not
something BI reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from lake_assets.core.apply import commit as committing
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.formats.delta import add_columns, open_table, row_count
from lake_assets.core.tables import LakeTable, TableFormat
from lake_assets.resources.storage import LakeStorage


@dataclass(frozen=True)
class Target:
    """What a commit needs of the declaration: the table's columns in order, its keys, the first
    key's kind and Spark SQL type, and its partition columns."""

    columns: list[str]
    keys: list[str]
    integer_key: bool
    key_type: str
    partition_by: tuple[str, ...]


class Planned(Protocol):
    """A commit's plan: `name` is its strategy's (the commit's label and report show it)."""

    @property
    def name(self) -> str: ...


class Curated(Protocol):
    """The table as a run found it (`version` None: not created yet)."""

    version: int | None

    @property
    def rows(self) -> int: ...

    @property
    def column_names(self) -> set[str]: ...

    def read(self, spark: SparkSession) -> DataFrame | None:
        """The table's rows at `version` (None before its first commit)."""

    def add_columns(self, columns: list[tuple[str, str]], descriptions: dict[str, str]) -> bool:
        """Add the missing `columns` (name, Spark SQL type) in one schema change; True if any."""

    def plan(self, spark: SparkSession, batch: DataFrame, inserted: int, updated: int, deleted: int) -> Planned:
        """How `batch` (one row per key: the table's columns and `_operation`; `inserted` new keys,
        `updated` and `deleted` present ones) is committed."""

    def commit(self, spark: SparkSession, batch: DataFrame, plan: Planned, label: str) -> None:
        """Commit `batch` as planned, in one commit labelled `label` where the format keeps one."""

    def reopened(self) -> Curated:
        """The table as it is now."""

    def committed(self, version_before: int | None, label: str) -> int | None:
        """The version of the commit made after `version_before` with `label` (a stopped run's),
        or None if it was not made."""


def open_curated(declaration: TableDeclaration, storage: LakeStorage, table: LakeTable, target: Target) -> Curated:
    """The declared table as it is now, in its format."""
    if table.format is TableFormat.ICEBERG:
        from lake_assets.core.apply.curated_iceberg import IcebergCurated

        return IcebergCurated.open(declaration, storage, table, target)
    return DeltaCurated(storage, table, target, open_table(storage, table))


class DeltaCurated:
    """A Delta table at a path (delta-rs for its log; commit.py's strategies for its commits)."""

    def __init__(self, storage: LakeStorage, table: LakeTable, target: Target, delta: DeltaTable | None) -> None:
        self.storage, self.table, self.target, self.delta = storage, table, target, delta
        self.version = delta.version() if delta is not None else None

    @property
    def rows(self) -> int:
        return row_count(self.delta) if self.delta is not None else 0

    @property
    def column_names(self) -> set[str]:
        return {f.name for f in self.delta.schema().fields} if self.delta is not None else set()

    def read(self, spark: SparkSession) -> DataFrame | None:
        if self.delta is None:
            return None
        return spark.read.format("delta").option("versionAsOf", self.version).load(self.table.uri(self.storage))

    def add_columns(self, columns: list[tuple[str, str]], descriptions: dict[str, str]) -> bool:
        if self.delta is None or not add_columns(self.delta, columns, descriptions):
            return False
        self.version = self.delta.version()
        return True

    def plan(self, spark: SparkSession, batch: DataFrame, inserted: int, updated: int,
             deleted: int) -> committing.CommitPlan:
        return committing.choose(spark, self._delta_target(), self.delta, batch, inserted, deleted)

    def commit(self, spark: SparkSession, batch: DataFrame, plan: Planned, label: str) -> None:
        assert isinstance(plan, committing.CommitPlan)  # this table's own plan
        committing.commit(spark, self._delta_target(), batch, plan, label)

    def reopened(self) -> DeltaCurated:
        return DeltaCurated(self.storage, self.table, self.target, open_table(self.storage, self.table))

    def committed(self, version_before: int | None, label: str) -> int | None:
        """The next version after `version_before` carries `label` (its commitInfo's `userMetadata`)."""
        delta = open_table(self.storage, self.table)
        if delta is None:
            return None
        expected = 0 if version_before is None else version_before + 1
        if delta.version() < expected:
            return None
        for entry in delta.history():
            if int(entry.get("version", -1)) == expected:
                return expected if entry.get("userMetadata") == label else None
        return None

    def _delta_target(self) -> committing.DeltaTarget:
        t = self.target
        return committing.DeltaTarget(self.table.uri(self.storage), t.columns, t.keys, t.integer_key, t.key_type,
                                      t.partition_by)
