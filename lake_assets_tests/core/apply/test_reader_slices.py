"""The reader validates an object a slice of rows at a time: its output is the same as in one piece."""

import pyarrow as pa
import pytest

from lake_assets.core.apply import reader
from lake_assets.core.apply.reader import in_order, KIND, ObjectToRead, RowKind, read_object
from lake_assets.core.declaration import SourceKind
from lake_assets.core.dms import DmsLayout
from lake_assets.core.registry import parse

pytestmark = pytest.mark.unit

SEQUENCED = parse("""
name: events
group: events
keys: [id]
sequence_by: changed
columns:
  - {name: id, type: INT, nullable: false}
  - {name: state, type: STRING, allowed: [open, shut]}
  - {name: changed, type: BIGINT}
sources:
  - {prefix: raw/events/fullload/, kind: snapshot}
  - {prefix: raw/events/cdc/, kind: cdc}
""", "test")

#: Good rows with bad ones among them in every slice of three: a bad value, an empty key, a wrong
#: field count (refused by the parse), an unknown operation, no sequence (`sequence_by` empty).
CDC = b"".join([
    b"I,1,open,5\n", b"U,2,ajar,6\n", b"I,,open,7\n", b"I,3,open,8\n", b"I,4,open\n", b"X,5,open,9\n",
    b"D,6,,10\n", b"I,7,shut,\n", b"U,8,shut,11\n", b"I,9,open,12\n", b"U,10,shut,13\n",
])


def _output(monkeypatch: pytest.MonkeyPatch, slice_rows: int, kind: SourceKind, data: bytes) -> dict:
    monkeypatch.setattr(reader, "SLICE_ROWS", slice_rows)
    prefix = next(s.prefix for s in SEQUENCED.sources if s.kind is kind)
    parts = list(read_object(SEQUENCED, DmsLayout(), ObjectToRead(3, f"{prefix}20240403-000000000.csv", kind,
                                                                  "20240403000000000000000.000000.x.0001.", None),
                             data, "etag"))
    out = pa.concat_tables(parts).to_pylist()
    records = [r["_record"] for r in out if r[KIND] == RowKind.ROW.value]
    assert records == sorted(records)  # slices validated on threads still come in the file's order
    by_kind = {k: sorted((r for r in out if r[KIND] == k.value), key=lambda r: r["_record"] or 0) for k in RowKind}
    return {"parts": len(parts), **{k.value: rows for k, rows in by_kind.items()}}


@pytest.mark.parametrize("kind", [SourceKind.CDC, SourceKind.SNAPSHOT])
def test_slices_of_three_rows_give_the_output_of_one_slice(monkeypatch: pytest.MonkeyPatch, kind: SourceKind) -> None:
    data = CDC if kind is SourceKind.CDC else b"".join(line.split(b",", 1)[1] for line in CDC.splitlines(True))
    whole, sliced = _output(monkeypatch, 1 << 20, kind, data), _output(monkeypatch, 3, kind, data)
    assert whole["parts"] == 3 and sliced["parts"] == 6  # rows (one part per slice), refusals, the file row
    for part in RowKind:
        assert sliced[part.value] == whole[part.value], part
    (summary,) = sliced["file"]
    assert (summary["_records"], summary["_valid"] + summary["_refused"]) == (11, 11)
    assert summary["_refused"] == len(sliced["refusal"]) >= 4
    sequences = [r["_sequence"] for r in sliced["row"]]
    assert len(set(sequences)) == len(sequences)


def test_in_order_keeps_the_order_and_a_bounded_number_running() -> None:
    import threading
    import time

    running, most, lock = 0, 0, threading.Lock()

    def slow(item: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.01 + 0.02 * (item % 3))  # later items often finish first
        with lock:
            running -= 1
        if item == 7:
            raise ValueError("item 7")
        return item * 10

    results = in_order(slow, list(range(7)), 2)
    assert list(results) == [i * 10 for i in range(7)] and most == 2
    with pytest.raises(ValueError, match="item 7"):
        list(in_order(slow, list(range(9)), 2))
    assert list(in_order(slow, [1, 2], 1)) == [10, 20]


#: Objects read together: two of one layout with bad rows among good ones, one with a header (a
#: layout of its own), one refused by its name, one with no row; snapshots beside CDC files.
OBJECTS = [
    (SourceKind.CDC, "20240403-000000000.csv", CDC, None),
    (SourceKind.CDC, "20240404-000000000.csv", b"U,1,shut,20\nI,11,ajar,21\nD,2,,22\nI,12,open,\n", None),
    (SourceKind.CDC, "20240405-000000000.csv", b"op,id,state,changed\nI,13,open,30\nI,x,open,31\n", None),
    (SourceKind.CDC, "transactions.csv", b"I,14,open,40\n", "dms_layout: a DMS transaction file"),
    (SourceKind.CDC, "20240406-000000000.csv", b"", None),
    (SourceKind.SNAPSHOT, "LOAD00000001.csv", b"1,open,1\n2,ajar,2\n3,shut,3\n", None),
    (SourceKind.SNAPSHOT, "LOAD00000002.csv", b"4,open,4\n,open,5\n", None),
]


def _objects() -> list[tuple[ObjectToRead, bytes, str]]:
    out = []
    for index, (kind, name, data, refusal) in enumerate(OBJECTS):
        prefix = next(s.prefix for s in SEQUENCED.sources if s.kind is kind)
        sequence = f"2024040{index}000000000000000.000000.x.0001."
        out.append((ObjectToRead(index, prefix + name, kind, sequence, refusal), data, f"etag-{index}"))
    return out


def test_small_objects_read_together_give_the_output_of_each_read_alone() -> None:
    alone = pa.concat_tables([t for obj, data, etag in _objects()
                              for t in read_object(SEQUENCED, DmsLayout(), obj, data, etag)]).to_pylist()
    together = pa.concat_tables(list(reader.read_objects(SEQUENCED, DmsLayout(), _objects()))).to_pylist()

    def ordered(rows: list[dict]) -> list[dict]:
        return sorted(rows, key=lambda r: (r["_file"], r[KIND], r["_record"] or 0))
    assert ordered(together) == ordered(alone)
    # every object's rows are there: valid ones from the two alike CDC files, each with its own sequence
    files = {r["_file"]: r for r in alone if r[KIND] == RowKind.FILE.value}
    assert [files[i]["_valid"] for i in range(len(OBJECTS))] == [6, 2, 1, 0, 0, 2, 1]
    assert files[3]["_refusal"].startswith("dms_layout")
    rows = [r for r in together if r[KIND] == RowKind.ROW.value and r["_file"] == 1]
    assert [(r["id"], r["_record"], r["_sequence"][:23]) for r in rows] == [
        (1, 1, "00000000000000000000020"), (2, 3, "00000000000000000000022")]
