"""How a raw object is read, decided from its key and first bytes (pure Python, no server)."""

import pyarrow as pa
import pytest

from lake_assets.core.apply.layout import DMS_TIMESTAMP, OPERATION, dms_rows, file_layout, object_refusal, \
    snapshot_group
from lake_assets.core.apply.parse import RECORD
from lake_assets.core.declaration import RefusalReason as Reason, SourceKind
from lake_assets.core.dms import DmsLayout
from lake_assets.core.registry import declaration, parse

INSURANCE = declaration("insurance")
V1, V2 = INSURANCE.contracts
CDCLOAD, FULLLOAD = SourceKind.CDC, SourceKind.SNAPSHOT
SOURCES = {kind: next(s for s in INSURANCE.sources if s.kind is kind) for kind in SourceKind}

DMS = DmsLayout()
DATA = "1,2024-12-31,Urban,MA,Northeast,100,Retail,N,Y"
TS = "2024-04-01 09:50:00.123456"


def layout(kind: SourceKind, *lines: str, dms: DmsLayout = DMS):
    return file_layout(INSURANCE, SOURCES[kind], "".join(f"{line}\n" for line in lines).encode(), dms)


@pytest.mark.parametrize(("kind", "lines", "columns", "header"), [
    # DMS's default: no header; CDC records lead with the operation
    (CDCLOAD, [f"I,{DATA}"], (OPERATION, *V1.names), False),
    (CDCLOAD, [f"U,{DATA},true"], (OPERATION, *V2.names), False),
    (FULLLOAD, [DATA, DATA], V1.names, False),
    (FULLLOAD, [f"{DATA},false"], V2.names, False),
    # IncludeOpForFullLoad; CdcInsertsOnly without it: no operation field
    (FULLLOAD, [f"I,{DATA}"], (OPERATION, *V1.names), False),
    (CDCLOAD, [DATA, DATA], V1.names, False),
    # TimestampColumnName: before the source's columns, after the operation
    (CDCLOAD, [f"I,{TS},{DATA}", f"D,{TS},{DATA}"], (OPERATION, DMS_TIMESTAMP, *V1.names), False),
    (FULLLOAD, [f"{TS},{DATA}"], (DMS_TIMESTAMP, *V1.names), False),
    (FULLLOAD, [f"I,{TS},{DATA},true"], (OPERATION, DMS_TIMESTAMP, *V2.names), False),
    # AddColumnName: the header says it all
    (FULLLOAD, [",".join(V1.names), DATA], V1.names, True),
    (CDCLOAD, ["Op," + ",".join(V2.names), f"I,{DATA},true"], (OPERATION, *V2.names), True),
    (CDCLOAD, ["Op,ts," + ",".join(V1.names), f"I,{TS},{DATA}"], (OPERATION, DMS_TIMESTAMP, *V1.names), True),
    (FULLLOAD, [",".join(V1.names)], V1.names, True),  # a header only: an empty snapshot
])
def test_what_the_file_says(kind: str, lines: list[str], columns: tuple, header: bool) -> None:
    found = layout(kind, *lines)
    assert (found.columns, found.header, found.refusal) == (tuple(columns), header, None)


def test_a_header_names_the_timestamp_column_anywhere_when_told_its_name() -> None:
    lines = ["OP," + ",".join(V1.names) + ",Commit_TS", f"U,{DATA},{TS}"]
    untold = layout(CDCLOAD, *lines).refusal  # not where DMS writes it, nor declared by a contract
    assert untold.reason == Reason.BAD_HEADER and "LAKE_DMS_TIMESTAMP_COLUMN=commit_ts" in untold.detail
    told = layout(CDCLOAD, *lines, dms=DmsLayout(timestamp_column="commit_ts"))
    assert told.columns == (OPERATION, *V1.names, DMS_TIMESTAMP) and told.refusal is None


@pytest.mark.parametrize(("kind", "lines", "reason", "words"), [
    # the timestamp where DMS does not write it, the count fitting contract v2: refused, not half applied
    (CDCLOAD, [f"U,{DATA},{TS}", f"D,{DATA},{TS}"], Reason.DMS_LAYOUT, ["TimestampColumnName", "field 11",
                                                                        "is_flagged"]),
    (CDCLOAD, [f"U,{DATA},true,{TS}"], Reason.DMS_LAYOUT, ["past every column"]),
    (FULLLOAD, [f"{DATA},{TS}"], Reason.DMS_LAYOUT, ["TimestampColumnName"]),
    (CDCLOAD, [f"U,{DATA},true,7"], Reason.UNDECLARED_COLUMN, ["12 fields", "contract v2"]),
    (FULLLOAD, [",".join([*V2.names, "risk_score"]), f"{DATA},true,7"], Reason.UNDECLARED_COLUMN, ["risk_score"]),
    (FULLLOAD, ["policy_id,expiry", DATA], Reason.BAD_HEADER, ["header must be"]),
    (CDCLOAD, ["Op,commit_time," + ",".join(V1.names), f"I,yesterday,{DATA}"], Reason.BAD_HEADER,
     ["LAKE_DMS_TIMESTAMP_COLUMN=commit_time"]),
    (FULLLOAD, [], Reason.BAD_HEADER, ["empty"]),
    (CDCLOAD, [f"I;{DATA.replace(',', ';')}"], Reason.DMS_LAYOUT, ["CsvDelimiter", "';'"]),
    (FULLLOAD, [DATA.replace(",", "|"), DATA.replace(",", "|")], Reason.DMS_LAYOUT,
     ["CsvDelimiter", "delimiter: '|'", "raw/fullload/"]),
])
def test_refused_whole(kind: str, lines: list[str], reason: Reason, words: list[str]) -> None:
    refusal = layout(kind, *lines).refusal
    assert refusal is not None and refusal.reason == reason
    assert all(word in refusal.detail for word in words), refusal.detail


def test_a_first_record_that_names_no_key_is_a_row_of_a_refused_file() -> None:
    assert layout(FULLLOAD, "id,expiry,location", DATA).header is False  # quarantined with the rows: nothing lost
    assert layout(FULLLOAD, "policy_id,expiry", DATA).header is True


def test_a_data_row_is_never_a_header() -> None:
    for first in (f"I,{DATA}", DATA, "D,abc,,,,,,,,", "X,1,2024-01-31,Urban", "This is not a CSV file."):
        assert layout(CDCLOAD, first).header is False, first


def test_snapshot_groups_and_names() -> None:
    assert snapshot_group("raw/fullload/dbo/policy/LOAD0000000A.csv") == "raw/fullload/dbo/policy/LOAD*.csv"
    assert snapshot_group("raw/fullload/dbo/policy/SEGMENT2_LOAD00000009.csv") == "raw/fullload/dbo/policy/LOAD*.csv"
    assert snapshot_group("raw/fullload/dbo/policy/LOAD0000000G.csv") == "raw/fullload/dbo/policy/LOAD0000000G.csv"
    assert snapshot_group("raw/fullload/full-load.csv") == "raw/fullload/full-load.csv"
    refusal = object_refusal(SOURCES[CDCLOAD], "raw/cdcload/txn/CDC_TXN-20201117153046033.csv", DMS)
    assert refusal.reason == Reason.DMS_LAYOUT and "PreserveTransactions" in refusal.detail
    assert object_refusal(SOURCES[CDCLOAD], "raw/cdcload/manual-fix.csv", DMS).reason == Reason.NO_SEQUENCE
    assert object_refusal(SOURCES[CDCLOAD], "raw/cdcload/2024/04/01/20240401-0950000000.csv", DMS) is None
    assert object_refusal(SOURCES[FULLLOAD], "raw/fullload/manual.csv", DMS) is None


def test_dms_rows_drop_the_timestamp_and_read_csv_null_value() -> None:
    rows = pa.table({OPERATION: ["I", "I"], DMS_TIMESTAMP: [TS, TS], "policy_id": ["1", "NULL"],
                     "location_name": ["NULL", "Urban"], RECORD: [1, 2]})
    assert dms_rows(rows, DMS).column_names == [OPERATION, "policy_id", "location_name", RECORD]
    nulls = dms_rows(rows, DmsLayout(csv_null_value="NULL"))
    assert nulls["policy_id"].to_pylist() == ["1", ""] and nulls["location_name"].to_pylist() == ["", "Urban"]


GRADES = parse("""
name: grades
group: grades
keys: [grade]
columns:
  - {name: grade, type: STRING, nullable: false}
  - {name: points, type: INT}
sources:
  - {prefix: raw/grades/fullload/, kind: snapshot}
  - {prefix: raw/grades/cdc/, kind: cdc}
""", "test")
EVENTS = parse("""
name: events
group: events
keys: [id]
columns:
  - {name: ts, type: TIMESTAMP}
  - {name: id, type: INT, nullable: false}
  - {name: v, type: STRING}
sources:
  - {prefix: raw/events/fullload/, kind: snapshot}
  - {prefix: raw/events/cdc/, kind: cdc}
""", "test")


@pytest.mark.parametrize(("table", "kind", "lines", "columns"), [
    # a first column of single letters is data when the DMS reading fits no contract...
    (GRADES, FULLLOAD, ["A,4", "B,3", "C,2"], ("grade", "points")),
    # ...and DMS's operation when it does
    (GRADES, CDCLOAD, ["I,A,4", "U,B,3"], (OPERATION, "grade", "points")),
    # a first column of times is data when taking it for DMS's commit timestamp fits no contract
    (EVENTS, FULLLOAD, [f"{TS},1,x", f"{TS},2,y"], ("ts", "id", "v")),
    (EVENTS, CDCLOAD, [f"I,{TS},1,x"], (OPERATION, "ts", "id", "v")),
    (EVENTS, CDCLOAD, [f"I,{TS},{TS},1,x"], (OPERATION, DMS_TIMESTAMP, "ts", "id", "v")),
])
def test_data_that_looks_like_dms_fields_is_data_when_only_that_reading_fits(table, kind: SourceKind,
                                                                             lines: list[str], columns: tuple) -> None:
    source = next(s for s in table.sources if s.kind is kind)
    found = file_layout(table, source, "".join(f"{line}\n" for line in lines).encode(), DMS)
    assert (found.columns, found.header, found.refusal) == (columns, False, None)


def _with_delimiter(delimiter: str):
    """The insurance declaration with both sources' fields separated by `delimiter`."""
    return INSURANCE.model_copy(update={"sources": tuple(s.model_copy(update={"delimiter": delimiter})
                                                         for s in INSURANCE.sources)})


@pytest.mark.parametrize("delimiter", ["|", ";", "\t"])
@pytest.mark.parametrize(("kind", "lines", "columns", "header"), [
    (CDCLOAD, [f"I,{TS},{DATA}", f"D,{TS},{DATA}"], (OPERATION, DMS_TIMESTAMP, *V1.names), False),
    (FULLLOAD, [DATA, f"{DATA}"], V1.names, False),
    (FULLLOAD, [",".join(V2.names), f"{DATA},true"], V2.names, True),
    (CDCLOAD, ["Op," + ",".join(V1.names), f"U,{DATA}"], (OPERATION, *V1.names), True),
])
def test_a_declared_delimiter_reads_the_layouts_a_comma_does(delimiter: str, kind: SourceKind, lines: list[str],
                                                              columns: tuple, header: bool) -> None:
    table = _with_delimiter(delimiter)
    source = next(s for s in table.sources if s.kind is kind)
    data = "".join(f"{line.replace(',', delimiter)}\n" for line in lines).encode()
    found = file_layout(table, source, data, DMS)
    assert (found.columns, found.header, found.refusal) == (tuple(columns), header, None)


def test_a_file_of_another_delimiter_than_declared_is_refused_naming_both() -> None:
    table = _with_delimiter("|")
    source = next(s for s in table.sources if s.kind is FULLLOAD)
    refusal = file_layout(table, source, f"{DATA}\n{DATA}\n".encode(), DMS).refusal
    assert refusal is not None and refusal.reason == Reason.DMS_LAYOUT
    assert "separated by ','" in refusal.detail and "not by the declared '|'" in refusal.detail


def test_parts_of_a_load_group_whatever_their_suffix() -> None:
    assert snapshot_group("raw/dims/LOAD00000002.dat") == "raw/dims/LOAD*.dat"
    assert snapshot_group("raw/dims/LOAD00000002.CSV") == "raw/dims/LOAD*.csv"
