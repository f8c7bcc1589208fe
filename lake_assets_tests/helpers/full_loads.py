"""A table fed by full loads and CDC files, and the sequence two tests of it share: a first full
load, a second, then a CDC file newer than both, with the second load applied in a run of its own
or together with the CDC file."""

import uuid

from pyspark.sql import SparkSession

from lake_assets.core.apply.run import apply_pending
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.registry import parse
from lake_assets.resources.storage import LakeStorage


def loaded_table(group: str, columns: list[str], options: str = "") -> TableDeclaration:
    """A new table `<group>_<random>` keyed on `id INT`, then `columns` (`name TYPE`), with a full-load
    prefix and a CDC prefix of its own; `options`: more lines of its declaration."""
    name = f"{group}_{uuid.uuid4().hex[:6]}"
    declared = "\n".join(f"  - {{name: {column.split()[0]}, type: {column.split()[1]}}}" for column in columns)
    return parse(f"""
name: {name}
group: {group}
keys: [id]
columns:
  - {{name: id, type: INT, nullable: false}}
{declared}
{options}
sources:
  - {{prefix: raw/{name}/fullload/, kind: snapshot}}
  - {{prefix: raw/{name}/cdc/, kind: cdc}}
""", "test")


def load_load_change(storage: LakeStorage, spark: SparkSession, table: TableDeclaration, first: str, second: str,
                     later: str, together: bool) -> None:
    """Apply the full load `first`; then the full load `second` (in a run of its own unless
    `together`) and the CDC file `later`, newer than both."""
    storage.put_bytes(f"raw/{table.name}/fullload/v1/LOAD00000001.csv", first.encode())
    apply_pending(table, storage, spark, "run-1")
    storage.put_bytes(f"raw/{table.name}/fullload/v2/LOAD00000001.csv", second.encode())
    if not together:
        apply_pending(table, storage, spark, "run-2")
    storage.put_bytes(f"raw/{table.name}/cdc/20240402-100000000.csv", later.encode())
    apply_pending(table, storage, spark, "run-3")
