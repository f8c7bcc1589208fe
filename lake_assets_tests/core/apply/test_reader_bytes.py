"""What the reader makes of an object's bytes before parsing: a UTF-8 byte order mark is not data."""

import pyarrow as pa
import pytest

from lake_assets.core.apply.reader import KIND, REASON, UTF8_BOM, ObjectToRead, RowKind, read_object
from lake_assets.core.declaration import SourceKind
from lake_assets.core.dms import DmsLayout
from lake_assets.core.registry import parse

pytestmark = pytest.mark.unit

DECLARED = parse("""
name: marked
group: marked
keys: [id]
columns:
  - {name: id, type: INT, nullable: false}
  - {name: name, type: STRING}
sources:
  - {prefix: raw/marked/fullload/, kind: snapshot}
  - {prefix: raw/marked/cdc/, kind: cdc}
""", "test")


def _read(key: str, kind: SourceKind, data: bytes) -> tuple[list[tuple], list[str], dict]:
    prefix = next(s.prefix for s in DECLARED.sources if s.kind is kind)
    out = pa.concat_tables(read_object(DECLARED, DmsLayout(), ObjectToRead(0, key, kind, prefix, None), data,
                                       "etag")).to_pylist()
    rows = [(r["id"], r["name"]) for r in out if r[KIND] == RowKind.ROW.value]
    reasons = [r[REASON] for r in out if r[KIND] == RowKind.REFUSAL.value]
    (summary,) = [r for r in out if r[KIND] == RowKind.FILE.value]
    return rows, reasons, summary


@pytest.mark.parametrize("mark", [b"", UTF8_BOM])
def test_a_full_load_with_a_header_reads_the_same_with_or_without_a_byte_order_mark(mark: bytes) -> None:
    data = mark + b"id,name\n1,a\n2,b\n"
    rows, reasons, summary = _read("raw/marked/fullload/LOAD00000001.csv", SourceKind.SNAPSHOT, data)
    assert rows == [(1, "a"), (2, "b")] and reasons == []
    assert summary["_size"] == len(data) and summary["_refusal"] is None


@pytest.mark.parametrize("mark", [b"", UTF8_BOM])
def test_a_headerless_cdc_file_reads_the_same_with_or_without_a_byte_order_mark(mark: bytes) -> None:
    rows, reasons, summary = _read("raw/marked/cdc/20240403-000000000.csv", SourceKind.CDC, mark + b"I,3,c\nI,4,d\n")
    assert rows == [(3, "c"), (4, "d")] and reasons == [] and summary["_refusal"] is None
