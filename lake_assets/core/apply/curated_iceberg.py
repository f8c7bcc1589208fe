"""A declared table kept as Iceberg in the lake's REST catalog: the change core's questions
(curated.py) answered by pyiceberg, its commits made by Sail.

The table is created by pyiceberg (the declared columns' types, the partition spec `partition_by`
declares, merge-on-read MERGEs), then written by the engine under its catalog name
(`lake.<group>.<name>`). A version is a snapshot id. Strategies:
- `create`: the first commit, an append of the batch's upserts;
- `append`: a batch of new keys only (nothing to update or delete): an append;
- `merge`: one `MERGE INTO` guarded by the sequence; merge-on-read, so it writes a position
  delete per replaced row and appends the upserts instead of rewriting the files it touches;
- `rewrite`: changes to a quarter of the table's rows or more: one `INSERT OVERWRITE` of the
  rows no change reaches plus the upserts (it also folds in every delete file).

Sail keeps no label on an Iceberg snapshot (no `snapshot-property.*` write option), so a stopped
run's commit is recognised by its place: the snapshot whose parent is the one the run found.
Only a run holding the table's write lease commits to it, and it finishes a stopped run first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lake_assets.core.apply.reader import SEQUENCE
from lake_assets.core.apply.resolve import AUDIT_TYPES, DELETE
from lake_assets.core.apply.validate import OPERATION
from lake_assets.core.cdc import merge_sql
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.formats import iceberg
from lake_assets.core.partition_fields import iceberg_partitioning, iceberg_transform
from lake_assets.core.tables import LakeTable
from lake_assets.resources.storage import LakeStorage

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from lake_assets.core.apply.curated import Planned, Target

#: Changes to this share of the table's rows (updates and deletes) or more rewrite it whole.
REWRITE_SHARE = 0.25
PROPERTIES = {"format-version": "2", "write.parquet.compression-codec": "zstd",
              "write.merge.mode": "merge-on-read", "write.update.mode": "merge-on-read",
              "write.delete.mode": "merge-on-read"}


@dataclass(frozen=True)
class IcebergPlan:
    """A commit's strategy: create, append, merge or rewrite (see the module docstring)."""

    name: str


class IcebergCurated:
    """A declared Iceberg table as found (`version`: its current snapshot id)."""

    def __init__(self, declaration: TableDeclaration, storage: LakeStorage, table: LakeTable, target: Target,
                 found: Table | None) -> None:
        self.declaration, self.storage, self.table, self.target, self.found = declaration, storage, table, target, found
        self.version = iceberg.current_snapshot_id(found) if found is not None else None

    @classmethod
    def open(cls, declaration: TableDeclaration, storage: LakeStorage, table: LakeTable,
             target: Target) -> IcebergCurated:
        return cls(declaration, storage, table, target, iceberg.open_table(storage, table))

    @property
    def rows(self) -> int:
        return iceberg.row_count(self.found) if self.found is not None else 0

    @property
    def column_names(self) -> set[str]:
        return {f.name for f in self.found.schema().fields} if self.found is not None else set()

    def read(self, spark: SparkSession) -> DataFrame | None:
        """The found snapshot's rows, with every column of the table now: a snapshot is read with
        the schema it was written with, so the columns added since (`add_columns`) read as NULL."""
        if self.version is None:
            return None
        found = spark.read.option("snapshot-id", str(self.version)).table(self.table.engine_name)
        added = {name: F.lit(None).cast(kind) for name, kind in self._types().items()
                 if name in self.column_names and name not in found.columns}
        return found.withColumns(added) if added else found

    def add_columns(self, columns: list[tuple[str, str]], descriptions: dict[str, str]) -> bool:
        if self.found is None:
            return False
        missing = [(name, kind) for name, kind in columns if name not in self.column_names]
        if not missing:
            return False
        with self.found.update_schema() as update:
            for name, kind in missing:
                update.add_column(name, iceberg_type(kind), doc=descriptions.get(name) or None)
        self.found = iceberg.open_table(self.storage, self.table)
        return True

    def plan(self, spark: SparkSession, batch: DataFrame, inserted: int, updated: int, deleted: int) -> IcebergPlan:
        if self.version is None:
            return IcebergPlan("create")
        if not updated and not deleted:
            return IcebergPlan("append")
        if updated + deleted >= REWRITE_SHARE * self.rows:
            return IcebergPlan("rewrite")
        return IcebergPlan("merge")

    def commit(self, spark: SparkSession, batch: DataFrame, plan: Planned, label: str) -> None:
        assert isinstance(plan, IcebergPlan)  # this table's own plan
        columns, name = self.target.columns, self.table.engine_name
        upserts = batch.where(F.col(OPERATION) != DELETE)
        if plan.name == "create":
            self._create()
        else:
            self._follow_partitioning()
        if plan.name in ("create", "append"):
            upserts.select(*columns).writeTo(name).append()
            return
        view = "lake_apply_batch"
        if plan.name == "merge":
            batch.select(*columns).createOrReplaceTempView(view)
            newer = f"(t.{SEQUENCE} IS NULL OR s.{SEQUENCE} >= t.{SEQUENCE})"
            spark.sql(merge_sql(name, view, self.target.keys, columns, newer=newer)).collect()
            return
        keys = self.target.keys
        current = self.read(spark)
        assert current is not None  # a rewrite follows a first commit
        rows = current.select(*keys, F.col(SEQUENCE).alias("_row_sequence"))
        at_least_as_new = F.col("_row_sequence").isNull() | (F.col(SEQUENCE) >= F.col("_row_sequence"))
        changes = batch.join(rows, keys, "left").where(at_least_as_new).drop("_row_sequence")
        kept = current.join(changes.select(*keys), keys, "left_anti").select(*columns)
        kept.unionByName(changes.where(F.col(OPERATION) != DELETE).select(*columns)).createOrReplaceTempView(view)
        spark.sql(f"INSERT OVERWRITE {name} SELECT {', '.join(columns)} FROM {view}").collect()

    def reopened(self) -> IcebergCurated:
        return IcebergCurated.open(self.declaration, self.storage, self.table, self.target)

    def committed(self, version_before: int | None, label: str) -> int | None:
        """The snapshot whose parent is `version_before` on the current lineage (None: the first)."""
        current = iceberg.open_table(self.storage, self.table)
        if current is None:
            return None
        snapshot = current.current_snapshot()
        while snapshot is not None:
            if snapshot.parent_snapshot_id == version_before:
                return snapshot.snapshot_id
            parent = snapshot.parent_snapshot_id
            snapshot = current.snapshot_by_id(parent) if parent is not None else None
        return None

    def _create(self) -> None:
        """Create the table (it may exist without a snapshot: a run stopped before its first commit)."""
        from pyiceberg.schema import Schema
        from pyiceberg.types import NestedField

        client = self.storage.catalog().pyiceberg()
        namespace, _ = self.table.identifier
        client.create_namespace_if_not_exists(namespace)
        types = self._types()
        descriptions = {c.name: c.description for c in self.declaration.columns}
        schema = Schema(*(NestedField(i + 1, name, iceberg_type(types[name]), required=False,
                                      doc=descriptions.get(name) or None)
                          for i, name in enumerate(self.target.columns)))
        self.found = client.create_table_if_not_exists(self.table.identifier, schema=schema,
                                                       partition_spec=self._spec(schema),
                                                       properties=PROPERTIES)

    def _types(self) -> dict[str, str]:
        """Each column's Spark SQL type: the declared ones and the audit columns."""
        return {c.name: c.type for c in self.declaration.columns} | {k: v.upper() for k, v in AUDIT_TYPES.items()}

    def _spec(self, schema):
        from pyiceberg.partitioning import PartitionField, PartitionSpec

        return PartitionSpec(*(PartitionField(source_id=schema.find_field(field.column).field_id, field_id=1000 + i,
                                              transform=iceberg_transform(field), name=field.name)
                               for i, field in enumerate(self.declaration.partition_fields)))

    def _follow_partitioning(self) -> None:
        """Evolve the table's partition spec to the declared one (metadata only: files written
        before keep their layout, new ones follow it)."""
        assert self.found is not None
        if iceberg_partitioning(self.found) == list(self.declaration.partition_by):
            return
        with self.found.update_spec() as update:
            for spec_field in self.found.spec().fields:
                update.remove_field(spec_field.name)
            for field in self.declaration.partition_fields:
                update.add_field(field.column, iceberg_transform(field), field.name)
        self.found = iceberg.open_table(self.storage, self.table)


def iceberg_type(sql_type: str):
    """The Iceberg type of a declared Spark SQL type."""
    from pyiceberg import types

    spelled = sql_type.upper()
    if spelled.startswith("DECIMAL("):
        precision, scale = spelled[len("DECIMAL("):-1].split(",")
        return types.DecimalType(int(precision), int(scale))
    return {"INT": types.IntegerType(), "BIGINT": types.LongType(), "STRING": types.StringType(),
            "DATE": types.DateType(), "BOOLEAN": types.BooleanType(), "DOUBLE": types.DoubleType(),
            "TIMESTAMP": types.TimestamptzType()}[spelled]
