"""Sequences of changes: file times from DMS names and date folders, deliveries, rows."""

import numpy as np
import pytest

from lake_assets.core.errors import UsageError
from lake_assets.core.sequence import ARRIVAL_PART, FileStamp, arrival_stamp, file_stamp, folder_pattern, \
    row_sequences

YMD, DMY = folder_pattern("YYYY/MM/DD"), folder_pattern("DDMMYYYY")


@pytest.mark.parametrize(("key", "folders", "expected"), [
    ("20240401-090000000.csv", YMD, FileStamp("20240401090000000")),
    ("20240401-090000.csv", YMD, FileStamp("20240401090000000")),
    ("dbo/policy/2024/04/01/20240401-090000123.csv", YMD, FileStamp("20240401090000123")),  # the name wins
    ("2024/04/01/part-3.csv", YMD, FileStamp("20240401000000000", 3)),
    ("dbo/01042024/changes.csv", DMY, FileStamp("20240401000000000")),
    ("02032024/LOAD00000002.csv", DMY, FileStamp("20240302000000000", 2)),
    ("manual-fix.csv", YMD, None),
    ("01042024/changes.csv", YMD, None),          # not the configured order
    ("20240230-090000000.csv", YMD, None),        # no such day
    ("2024/13/01/changes.csv", YMD, None),
    ("123420240401-0900000001.csv", YMD, None),   # digits run on: not a DMS stamp
])
def test_file_stamp(key: str, folders, expected) -> None:
    assert file_stamp(key, folders) == expected


def test_folder_formats() -> None:
    assert file_stamp("2024040109/a.csv", folder_pattern("YYYYMMDDHH")) == FileStamp("20240401090000000")
    assert file_stamp("2024_04/a.csv", folder_pattern("YYYY_MM")) == FileStamp("20240401000000000")
    for bad in ("", "DD/MM", "YYYY.MM.DD"):
        with pytest.raises(UsageError, match="LAKE_CDC_FOLDER_DATE_FORMAT"):
            folder_pattern(bad)


def test_sequences_order_time_then_part_then_delivery_then_row() -> None:
    early, late = FileStamp("20240401090000000"), FileStamp("20240401090000001")
    ordered = [*row_sequences(early, 1, np.array([1, 2, 10])).to_pylist(),
               *row_sequences(early, 2, np.array([1])).to_pylist(),            # a re-delivery follows
               *row_sequences(FileStamp(early.time, 1), 1, np.array([1])).to_pylist(),
               *row_sequences(late, 1, np.array([1])).to_pylist()]
    assert ordered == sorted(ordered) and len(set(ordered)) == len(ordered)
    assert ordered[0] == "20240401090000000.000000.0001.0000000001"


def test_arrival_stamps_follow_what_came_before() -> None:
    first = arrival_stamp(None)
    assert first == FileStamp("0" * 17, ARRIVAL_PART)
    after_change = arrival_stamp("20240401090000000.000000.0002.0000000000")
    assert after_change == FileStamp("20240401090000000", ARRIVAL_PART)
    after_snapshot = arrival_stamp(after_change.base(0))
    assert after_snapshot == FileStamp("20240401090000000", ARRIVAL_PART + 1)
    assert first.base(0) < "20240101000000000" < after_change.base(0) < after_snapshot.base(0)
