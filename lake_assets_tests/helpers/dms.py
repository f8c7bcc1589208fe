"""Raw files shaped as AWS DMS writes them to S3, put and read back through the `lake` command
as a user does (`lake put`, `lake run`, `lake status`, `lake query`)."""

import json
from pathlib import Path

from lake_assets_tests.helpers.insurance_tables import DATA_COLUMN_NAMES
from lake_assets_tests.helpers.cli import lake

HEADER = ",".join(DATA_COLUMN_NAMES)


def fields(key: int, value: int) -> str:
    """The nine data fields of a policy row (contract v1, as the seed's files carry them)."""
    return f"{key},2024-12-31,Urban,MA,Northeast,{value},Retail,N,Y"


def commit_time(second: int) -> str:
    """A value of DMS's TimestampColumnName column (`yyyy-MM-dd HH:mm:ss.SSSSSS`)."""
    return f"2024-04-01 09:{second // 60:02d}:{second % 60:02d}.{second * 1013 % 10**6:06d}"


def load_part(counter: int) -> str:
    """DMS's name of a full-load part: a hexadecimal counter (`LOAD0000000A.csv`)."""
    return f"LOAD{counter:08X}.csv"


def put(tmp_path: Path, zone: str, name: str, *records: str, header: str | None = None) -> int:
    """`lake put` a file of `records` (and a `header` line first) as `name` in `zone`; its records."""
    local = tmp_path / "upload.csv"
    local.write_text("".join(f"{line}\n" for line in ([header] if header else []) + list(records)))
    code, out = lake("put", str(local), "--to", zone, "--as", name)
    assert code == 0, out
    return len(records)


def run(expected: int = 0) -> str:
    """`lake run`, which must end with exit code `expected` (3: it refused whole files)."""
    code, out = lake("run")
    assert code == expected, out
    return out


def status() -> dict[str, dict]:
    """`lake status`: each raw insurance file's row."""
    code, out = lake("status", "--format", "json")
    assert code == 0, out
    return {row["file"]: row for row in json.loads(out) if row["file"].startswith("raw/")}


def accounted(delivered: dict[str, int]) -> dict[str, dict]:
    """`lake status`, asserting that every raw row of every file in `delivered` (key below the
    bucket -> records put) is applied, superseded or quarantined, and nothing else is listed."""
    rows = status()
    assert set(rows) == set(delivered), rows
    for name, count in delivered.items():
        row = rows[name]
        assert row["rows"] == count, row
        assert row["applied"] + row["superseded"] + row["quarantined"] == count, row
    return rows


def values() -> dict[int, int]:
    """`lake query`: the insured value of each policy in the table."""
    code, out = lake("query", "SELECT policy_id, insured_value FROM insurance", "--format", "json")
    assert code == 0, out
    return {r["policy_id"]: r["insured_value"] for r in json.loads(out)}


def query(sql: str) -> list[dict]:
    code, out = lake("query", sql, "--format", "json")
    assert code == 0, out
    return json.loads(out)
