"""Change-data-capture MERGE, shared by every domain and table format.

A batch holds at most one row per key, with an operation column (`I`, `U` or `D`): the
statement deletes matched `D` rows, updates other matched rows and inserts unmatched
non-`D` rows. `target` is whatever names the table in Spark SQL: a Delta path
(delta.`s3://...`) or an Iceberg catalog table (`tpcds.web_sales`).
"""

from collections.abc import Sequence

OPERATION = "_operation"
DELETE = "D"


def merge_sql(target: str, source: str, keys: Sequence[str], columns: Sequence[str],
              operation: str | None = OPERATION) -> str:
    """`MERGE INTO target USING source` keyed on `keys`; without `operation`, a plain upsert."""
    on = " AND ".join(f"t.{k} = s.{k}" for k in keys)
    assignments = ", ".join(f"t.{c} = s.{c}" for c in columns if c not in keys)
    names = ", ".join(columns)
    values = ", ".join(f"s.{c}" for c in columns)
    if operation is None:
        return (f"MERGE INTO {target} AS t USING {source} AS s ON {on} "
                f"WHEN MATCHED THEN UPDATE SET {assignments} "
                f"WHEN NOT MATCHED THEN INSERT ({names}) VALUES ({values})")
    return (f"MERGE INTO {target} AS t USING {source} AS s ON {on} "
            f"WHEN MATCHED AND s.{operation} = '{DELETE}' THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {assignments} "
            f"WHEN NOT MATCHED AND s.{operation} <> '{DELETE}' THEN INSERT ({names}) VALUES ({values})")
