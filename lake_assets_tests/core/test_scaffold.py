"""`lake table add`'s guess from a sample: the header (after a byte order mark, with one-letter
names), and DMS's operation field only where a CDC file has one."""

import pytest

from lake_assets.core.scaffold import guess

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("mark", [b"", b"\xef\xbb\xbf"])
def test_a_header_after_a_byte_order_mark_names_the_columns(mark: bytes) -> None:
    found = guess(mark + b"order_id,status,amount\n1001,NEW,120.00\n1002,PAID,35.50\n")
    assert found.header and found.columns == [("order_id", "INT"), ("status", "STRING"), ("amount", "DOUBLE")]
    assert found.key == "order_id"


def test_a_named_first_column_of_single_letters_is_a_column_not_dms_operations() -> None:
    found = guess(b"grade,points\nA,4\nB,3\nC,2\n")
    assert found.header and not found.operation
    assert found.columns == [("grade", "STRING"), ("points", "INT")]


def test_a_one_letter_column_name_is_a_name() -> None:
    found = guess(b"ts,id,v\n2024-04-01 10:00:00,1,x\n2024-04-01 11:00:00,2,y\n")
    assert found.header and found.columns == [("ts", "TIMESTAMP"), ("id", "INT"), ("v", "STRING")]
    assert found.key == "id"


def test_dms_files_lead_with_their_operation_with_a_header_or_without() -> None:
    named = guess(b"Op,id,name\nI,1,a\nU,1,b\n")
    assert named.header and named.operation and named.columns == [("id", "INT"), ("name", "STRING")]
    # a headerless CDC file whose first record is all letters is not a header: its records lead with I/U/D
    bare = guess(b"U,abc,def\nI,ghi,jkl\nD,mno,pqr\n")
    assert not bare.header and bare.operation and [n for n, _ in bare.columns] == ["c1", "c2"]


def test_a_headerless_column_of_grades_is_data() -> None:
    found = guess(b"A,4\nB,3\nC,2\n")
    assert not found.header and not found.operation
    assert found.columns == [("c1", "STRING"), ("c2", "INT")]


@pytest.mark.parametrize("delimiter", ["|", ";", "\t"])
def test_the_delimiter_is_the_one_that_splits_the_records_alike(delimiter: str) -> None:
    sample = "c_id|name|since\n1|Smith, John|2024-01-02\n2|Doe, Jane|2024-02-03\n".replace("|", delimiter)
    found = guess(sample.encode())
    assert found.delimiter == delimiter and found.header
    assert found.columns == [("c_id", "INT"), ("name", "STRING"), ("since", "DATE")]


def test_a_comma_sample_stays_comma_when_another_sign_is_data() -> None:
    assert guess(b"id,path\n1,a|b\n2,c|d\n3,e;f\n").delimiter == ","


def test_the_declaration_says_how_the_files_are_written(tmp_path) -> None:
    from lake_assets.core.registry import parse
    from lake_assets.core.scaffold import render

    found = guess(b"1|Smith, John|10\n2|Doe, Jane|20\n")
    declared = parse(render("people", found, str(tmp_path / "people.dat")), "scaffold")
    assert {(s.delimiter, s.suffix) for s in declared.sources} == {("|", ".dat")}
    plain = parse(render("people", guess(b"id,name\n1,a\n"), "people.csv"), "scaffold")
    assert {(s.delimiter, s.suffix) for s in plain.sources} == {(",", ".csv")}


def test_an_iceberg_scaffold_offers_a_partition_transform() -> None:
    """Uncommented as offered, the Iceberg scaffold's partition line declares a transform; Delta's a column."""
    from lake_assets.core.registry import parse
    from lake_assets.core.scaffold import render

    found = guess(b"id,ordered_at,amount\n1,2024-04-01 10:00:00,5\n2,2024-04-02 11:00:00,6\n")
    for table_format, partitioned in (("iceberg", "days(ordered_at)"), ("delta", "ordered_at")):
        text = render("orders", found, "orders.csv", table_format)
        line = next(x for x in text.splitlines() if x.startswith("# partition_by:"))
        assert ("days(a_timestamp)" in line) == (table_format == "iceberg")
        if table_format == "delta":  # a Delta table partitions by a column's values: a DATE one here
            text = text.replace("type: TIMESTAMP", "type: DATE")
        declared = parse(text.replace(line, f'partition_by: ["{partitioned}"]'), "scaffold")
        assert declared.partition_by == (partitioned,)
