"""Sequences of changes: file times from DMS names and date folders, parts, origins, deliveries, rows."""

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lake_assets.core.errors import UsageError
from lake_assets.core import sequence
from lake_assets.core.sequence import ARRIVAL_PART, NO_ORIGIN, ROW_DIGITS, FileStamp, arrival_stamp, file_stamp, \
    folder_pattern, load_part, name_part, numbered, origin

YMD, DMY = folder_pattern("YYYY/MM/DD"), folder_pattern("DDMMYYYY")


def at(time: str, part: int = 0) -> FileStamp:
    """A stamp of `time` given to the millisecond or finer, in the 23 digits sequences hold."""
    return FileStamp(time.ljust(23, "0"), part)


@pytest.mark.parametrize(("key", "folders", "expected"), [
    ("20240401-090000000.csv", YMD, at("20240401090000000")),
    ("20240401-090000.csv", YMD, at("20240401090000")),
    ("20141029-1134010000.csv", YMD, at("201410291134010000")),  # DMS's guide: four digits of a second
    ("2024/04/01/20240401-0950000000.csv", YMD, at("202404010950000000")),  # the name wins over the folder
    ("20240401-095000123456789.csv", YMD, at("20240401095000123456789")),  # to the nanosecond
    ("dbo/policy/2024/04/01/20240401-090000123.csv", YMD, at("20240401090000123")),
    ("2024/04/01/part-3.csv", YMD, at("20240401", 3)),
    ("dbo/01042024/changes.csv", DMY, at("20240401")),
    ("02032024/LOAD00000002.csv", DMY, at("20240302", 2)),
    ("2024/04/01/LOAD0000000A.csv", YMD, at("20240401", 10)),  # DMS counts its parts in hexadecimal
    ("2024/04/01/LOAD00000010.csv", YMD, at("20240401", 16)),
    ("manual-fix.csv", YMD, None),
    ("01042024/changes.csv", YMD, None),          # not the configured order
    ("20240230-090000000.csv", YMD, None),        # no such day
    ("2024/13/01/changes.csv", YMD, None),
    ("123420240401-0900000001.csv", YMD, None),   # digits run on: not a DMS stamp
    ("20240401-0900000000000001.csv", YMD, None),  # more than nine digits of a second
])
def test_file_stamp(key: str, folders, expected) -> None:
    assert file_stamp(key, folders) == expected


def test_folder_formats() -> None:
    assert file_stamp("2024040109/a.csv", folder_pattern("YYYYMMDDHH")) == at("2024040109")
    assert file_stamp("2024_04/a.csv", folder_pattern("YYYY_MM")) == at("20240401")
    assert file_stamp("04/2024/01/a.csv", folder_pattern("MM/YYYY/DD")) == at("20240401")  # DMS's MMYYYYDD
    for bad in ("", "DD/MM", "YYYY.MM.DD"):
        with pytest.raises(UsageError, match="LAKE_CDC_FOLDER_DATE_FORMAT"):
            folder_pattern(bad)


def test_dms_load_parts_count_in_hexadecimal() -> None:
    names = [f"LOAD{n:08X}" for n in range(1, 0x12)]
    assert [load_part(n) for n in names] == list(range(1, 0x12))
    assert load_part("SEGMENT2_LOAD0000000A") == 10 and load_part("LOAD0000000g") is None
    assert load_part("full-load") is None and name_part("full-load") == 0 and name_part("part-7") == 7
    assert name_part("LOAD7FFFFFFF") == ARRIVAL_PART - 1  # parts from names stay below the arrival parts


def test_sequences_order_time_then_part_then_origin_then_delivery_then_row() -> None:
    early, late = at("20240401090000000"), at("20240401090000000000001")  # one nanosecond apart
    one, other = sorted(["raw/cdcload/x.csv", "raw/cdcload/x copy.csv"], key=origin)
    ordered = [*_rows(early.of(one), 1, [1, 2, 10]),
               *_rows(early.of(one), 2, [1]),   # a re-delivery follows
               *_rows(early.of(other), 1, [1]),  # same time: by origin
               *_rows(FileStamp(early.time, 1), 1, [1]),
               *_rows(late, 1, [1])]
    assert ordered == sorted(ordered) and len(set(ordered)) == len(ordered)
    assert ordered[0] == f"20240401090000000000000.000000.{origin(one)}.0001.0000000001"
    # the same order in pyarrow (Sail and JVM Spark compare strings as bytes too: one width, ASCII)
    shuffled = pa.array(ordered[::-1])
    assert shuffled.take(pc.sort_indices(shuffled)).to_pylist() == ordered


def _rows(stamp: FileStamp, delivery: int, records: list[int]) -> list[str]:
    """The sequences of a delivery's rows, as the reader numbers them (its prefix, then the record)."""
    return numbered(stamp.base(delivery)[:-ROW_DIGITS], np.array(records)).to_pylist()


def test_numbered_is_the_prefix_and_ten_digits_in_every_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sequence, "_CHUNK_ROWS", 3)  # 7 records: three chunks, the last one short
    records = [1, 9, 10, 99, 12345, 9_999_999_999, 3]
    got = numbered("p.", pa.chunked_array([pa.array(records[:2]), pa.array(records[2:])]))
    assert got.to_pylist() == [f"p.{r:010d}" for r in records] and got.type == pa.string()
    assert numbered("", np.array([], np.int64)).to_pylist() == []
    with pytest.raises(ValueError, match="more than 10 digits"):
        numbered("p.", np.array([10**10]))
    with pytest.raises(ValueError, match="more than 9999 deliveries"):  # four digits hold a delivery
        FileStamp("1" * 23).base(10**4)


def test_origin_is_the_keys_hash_after_a_dms_parts_counter() -> None:
    key = "raw/cdcload/2024/04/01/20240401-0950000000.csv"
    assert origin(key) == hashlib.sha256(key.encode()).hexdigest()[:16]
    assert FileStamp("1" * 23).of(key).origin == origin(key) and FileStamp("1" * 23).origin == NO_ORIGIN
    part = "raw/fullload/dbo/policy/LOAD0000000A.csv"
    assert origin(part) == "0000000a" + hashlib.sha256(part.encode()).hexdigest()[:8]
    parts = [f"raw/fullload/x/LOAD{n:08X}.csv" for n in range(1, 0x12)]
    assert sorted(parts, key=origin) == parts  # a snapshot's parts follow each other by their counters


def test_arrival_stamps_follow_what_came_before() -> None:
    first = arrival_stamp(None)
    assert first == FileStamp("0" * 23, ARRIVAL_PART)
    change = at("20240401090000000").of("raw/cdcload/a.csv").base(2)
    after_change = arrival_stamp(change)
    assert after_change == FileStamp(at("20240401090000000").time, ARRIVAL_PART)
    after_snapshot = arrival_stamp(after_change.base(0))
    assert after_snapshot == FileStamp(after_change.time, ARRIVAL_PART + 1)
    assert first.base(0) < "20240101000000000" < change < after_change.base(0) < after_snapshot.base(0)


def test_sequences_of_the_earlier_format_are_read_and_compare() -> None:
    """A lake written before the origin and nanoseconds keeps its stored sequences: they are
    read, and compare by time with new ones (within one millisecond the stored one is older)."""
    stored = "20240401090000123.000007.0002.0000000005"
    assert FileStamp.parse(stored) == FileStamp("20240401090000123000000", 7)
    after = arrival_stamp("20240401090000123.900003.0001.0000000000")
    assert after == FileStamp("20240401090000123000000", 900004)
    assert after.base(0) > "20240401090000123.900003.0001.0000000000"
    assert "20240401090000122.000000.0001.0000000001" < at("20240401090000123").base(1) \
        < "20240401090000124.000000.0001.0000000001"
    assert stored < at("20240401090000123").base(1)  # the same millisecond: the stored one is older
