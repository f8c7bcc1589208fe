"""Iceberg partition transforms in `partition_by` (`bucket(16, id)`, `truncate(365, sk)`, `days(at)`),
on the real embedded S3, REST catalog and Sail.

Sail computes each written row's partition; pyiceberg is the independent oracle of the transform
(its own implementation of Iceberg's spec) and the second reader of the table. A small dict model
is the expected table.
"""

import datetime as dt
import uuid

import pytest
from pyspark.sql import SparkSession

from lake_assets.core.apply.run import apply_pending
from lake_assets.core.declaration import DeclarationError, TableDeclaration
from lake_assets.core.formats import iceberg, iceberg_maintenance
from lake_assets.core.partition_fields import iceberg_partitioning, iceberg_transform, partition_field
from lake_assets.core.registry import parse
from lake_assets.core.tables import table_set
from lake_assets.declared.checks import schema_matches_contract
from lake_assets.resources.storage import LakeStorage

UTC = dt.timezone.utc
#: One CDC file per run: keys move between partitions (another sk, day, hour and month), one is deleted.
RUNS = [
    "I,1,east,7,2024-01-31 23:10:00,2024-01-31\nI,2,west,12,2024-02-01 00:05:00,2024-02-01\n"
    "I,3,east,365,2023-12-31 10:00:00,2023-12-31\nI,4,north,,2024-02-01 01:00:00,\n",
    "U,1,east,13,2024-02-01 09:00:00,2024-02-01\nD,3,east,365,2023-12-31 10:00:00,2023-12-31\n"
    "I,5,south,730,2025-06-01 12:00:00,2025-06-01\n",
]


def _text(name: str, partition_by: list[str], table_format: str = "iceberg") -> str:
    return f"""
name: {name}
group: transforms
format: {table_format}
keys: [id]
partition_by: [{', '.join(f'"{p}"' for p in partition_by)}]
columns:
  - {{name: id, type: BIGINT, nullable: false}}
  - {{name: region, type: STRING}}
  - {{name: sk, type: BIGINT}}
  - {{name: at, type: TIMESTAMP}}
  - {{name: sold_on, type: DATE}}
sources:
  - {{prefix: raw/{name}/cdc/, kind: cdc}}
"""


def _model(runs: list[str]) -> dict[int, tuple]:
    rows: dict[int, tuple] = {}
    for text in runs:
        for line in text.splitlines():
            op, key, region, sk, at, sold_on = line.split(",")
            if op == "D":
                rows.pop(int(key), None)
                continue
            rows[int(key)] = (region, int(sk) if sk else None,
                              dt.datetime.fromisoformat(at).replace(tzinfo=UTC),
                              dt.date.fromisoformat(sold_on) if sold_on else None)
    return rows


def _days(value: object) -> object:
    """A partition value as the transform gives it (pyiceberg reads a `days` partition back as a date)."""
    return (value - dt.date(1970, 1, 1)).days if isinstance(value, dt.date) else value


def _scan(storage: LakeStorage, declaration: TableDeclaration) -> dict[int, tuple]:
    found = iceberg.open_table(storage, table_set(declaration).table)
    assert found is not None
    return {r["id"]: (r["region"], r["sk"], r["at"], r["sold_on"]) for r in found.scan().to_arrow().to_pylist()}


@pytest.mark.parametrize("partition_by", [
    ["truncate(10, sk)"],
    ["bucket(4, id)", "months(sold_on)"],
    ["days(at)", "truncate(2, region)"],
    ["hours(at)", "years(sold_on)", "bucket(3, region)"],
])
def test_a_transform_partitioned_iceberg_table(storage: LakeStorage, spark: SparkSession,
                                               partition_by: list[str]) -> None:
    name = f"tx_{uuid.uuid4().hex[:6]}"
    table = parse(_text(name, partition_by), "test")
    prefix = table.sources[0].prefix
    storage.put_bytes(f"{prefix}20240101-000000000.csv", RUNS[0].encode())
    apply_pending(table, storage, spark, "run-1")
    found = iceberg.open_table(storage, table_set(table).table)
    assert found is not None and iceberg_partitioning(found) == partition_by
    # every data file holds the rows of one partition, as pyiceberg computes the transform of their values
    schema = found.schema()
    fields = table.partition_fields
    written = found.scan().to_arrow().to_pylist()
    expected = {tuple(iceberg_transform(f).transform(schema.find_field(f.column).field_type)(r[f.column])
                      for f in fields) for r in written}
    files = found.inspect.files().to_pylist()
    assert {tuple(_days(file["partition"][f.name]) for f in fields) for file in files} == expected
    assert sum(file["record_count"] for file in files) == len(written)
    assert schema_matches_contract(table, storage).passed

    storage.put_bytes(f"{prefix}20240102-000000000.csv", RUNS[1].encode())
    apply_pending(table, storage, spark, "run-2")
    assert _scan(storage, table) == _model(RUNS)
    # a query filtering on the column reads its rows (the engine projects the filter onto the transform)
    sk = spark.table(table_set(table).table.engine_name).where("sk >= 10 AND sk < 20").select("id").collect()
    assert sorted(r.id for r in sk) == [1, 2]


def test_a_changed_spec_is_followed_at_the_next_commit(storage: LakeStorage, spark: SparkSession) -> None:
    name = f"tx_{uuid.uuid4().hex[:6]}"
    first = parse(_text(name, ["truncate(10, sk)"]), "test")
    prefix = first.sources[0].prefix
    storage.put_bytes(f"{prefix}20240101-000000000.csv", RUNS[0].encode())
    apply_pending(first, storage, spark, "run-1")
    evolved = parse(_text(name, ["days(at)"]), "test")
    assert not schema_matches_contract(evolved, storage).passed  # the table is not yet as declared
    storage.put_bytes(f"{prefix}20240102-000000000.csv", RUNS[1].encode())
    apply_pending(evolved, storage, spark, "run-2")
    found = iceberg.open_table(storage, table_set(evolved).table)
    assert found is not None and iceberg_partitioning(found) == ["days(at)"]
    assert schema_matches_contract(evolved, storage).passed
    assert _scan(storage, evolved) == _model(RUNS)


@pytest.mark.parametrize("partition_by", [["days(at)"], ["bucket(3, region)", "truncate(100, sk)"]])
def test_compaction_leaves_a_file_per_partition(storage: LakeStorage, spark: SparkSession,
                                                partition_by: list[str]) -> None:
    """Two appends leave two small files in a partition; compaction (a `days` partition rewritten on its
    own, a `bucket` one with the whole table) leaves one, and the rows as they were."""
    name = f"tx_{uuid.uuid4().hex[:6]}"
    table = parse(_text(name, partition_by), "test")
    prefix = table.sources[0].prefix
    runs = [RUNS[0], "I,6,east,8,2024-01-31 08:00:00,2024-01-31\nI,7,west,14,2024-02-01 03:00:00,2024-02-01\n"]
    for number, text in enumerate(runs):
        storage.put_bytes(f"{prefix}2024010{number + 1}-000000000.csv", text.encode())
        apply_pending(table, storage, spark, f"run-{number}")
    found = iceberg.open_table(storage, table_set(table).table)
    assert found is not None
    files = found.inspect.files().to_pylist()
    per_partition = {repr(sorted(f["partition"].items())) for f in files}
    assert len(files) > len(per_partition)  # some partition holds two files
    iceberg_maintenance.compact(spark, found, table_set(table).table.engine_name)
    found = iceberg.open_table(storage, table_set(table).table)
    assert found is not None and iceberg_partitioning(found) == partition_by
    assert len(found.inspect.files().to_pylist()) == len(per_partition)
    assert _scan(storage, table) == _model(runs)


@pytest.mark.unit
@pytest.mark.parametrize("entry, text, field_name", [
    ("region", "region", "region"),
    ("Bucket( 16 ,id )", "bucket(16, id)", "id_bucket"),
    ("truncate(365, ws_sold_date_sk)", "truncate(365, ws_sold_date_sk)", "ws_sold_date_sk_trunc"),
    ("day(at)", "days(at)", "at_day"),
    ("hour(at)", "hours(at)", "at_hour"),
    ("month(sold_on)", "months(sold_on)", "sold_on_month"),
    ("YEARS(sold_on)", "years(sold_on)", "sold_on_year"),
])
def test_an_entry_is_spelled_one_way(entry: str, text: str, field_name: str) -> None:
    field = partition_field(entry)
    assert (field.text, field.name) == (text, field_name)
    assert partition_field(field.text) == field


@pytest.mark.unit
@pytest.mark.parametrize("partition_by, table_format, message", [
    (["days(at)"], "delta", "partition_by: days(at): a transform is Iceberg's hidden partitioning"),
    (["days(sk)"], "iceberg", "partition_by: sk is BIGINT; days's column is one of DATE, TIMESTAMP"),
    (["hours(sold_on)"], "iceberg", "partition_by: sold_on is DATE; hours's column is one of TIMESTAMP"),
    (["truncate(4, at)"], "iceberg", "partition_by: at is TIMESTAMP; truncate's column is one of INT, BIGINT, STRING"),
    (["at"], "iceberg", "partition_by: at is TIMESTAMP; a partition column is one of"),
    (["bucket(4, nope)"], "iceberg", "partition_by: nope not among the columns"),
    (["days(at)", "hours(at)"], "iceberg", "partition_by: a column is partitioned twice"),
    (["bucket(id)"], "iceberg", "partition_by: 'bucket(id)': bucket takes a width first, e.g. bucket(16, id)"),
    (["days(2, at)"], "iceberg", "partition_by: 'days(2, at)': days takes the column alone"),
    (["bucket(0, id)"], "iceberg", "the width must be a positive integer"),
    (["zorder(id)"], "iceberg", "zorder is not a partition transform (a column, bucket(N, column)"),
    (["id, region"], "iceberg", "is not a column, bucket(N, column), truncate(W, column)"),
])
def test_a_bad_entry_is_one_line(partition_by: list[str], table_format: str, message: str) -> None:
    with pytest.raises(DeclarationError) as refused:
        parse(_text("tx", partition_by, table_format), "test")
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)
