"""Unit tests of the tolerant CSV parser and the contract rules (no S3, no engine)."""

import datetime as dt
import random

import numpy as np
import pyarrow as pa
import pyarrow.compute  # pa.compute
import pytest

from lake_assets_tests.helpers.insurance_tables import CDC_COLUMN_NAMES, DATA_COLUMN_NAMES, Reason
from lake_assets.core.apply.parse import RECORD, RecordLines, file_shape, parse_csv
from lake_assets.core.apply.validate import validate as validate_declared
from lake_assets.core.registry import declaration

INSURANCE = declaration("insurance")


def validate(rows, operation):
    return validate_declared(INSURANCE, rows, operation)

HEADER = ",".join(DATA_COLUMN_NAMES)
GOOD = "2024-01-31,Urban,CA,West,1000,Retail,N,Y"  # every data field after the key


def cdc(text: str | bytes):
    data = text.encode() if isinstance(text, str) else text
    return parse_csv("raw/cdcload/f.csv", "etag", data, CDC_COLUMN_NAMES, has_header=False)


def full(text: str | bytes):
    data = text.encode() if isinstance(text, str) else text
    return parse_csv("raw/fullload/f.csv", "etag", data, DATA_COLUMN_NAMES, has_header=True)


def check_cdc(text: str):
    """Parse and validate a CDC file: (valid rows as dicts, {record: reason}, parsed)."""
    parsed = cdc(text)
    valid, invalid = validate(parsed.rows, None)
    rejected = parsed.rejected + invalid
    reasons = dict(zip(rejected.records.tolist(), rejected.reasons))
    # nothing is dropped: every record is valid or rejected, exactly once
    assert sorted(valid[RECORD].to_pylist() + list(reasons)) == list(range(1, parsed.record_count + 1))
    assert len(reasons) == len(rejected)
    return valid.to_pylist(), reasons, parsed


def reason_of(line: str) -> str | None:
    _, reasons, _ = check_cdc(line + "\n")
    return reasons.get(1)


# --- one reason per bad-row class --------------------------------------------------

@pytest.mark.parametrize(("line", "reason"), [
    ("U,1,2024-01-31,Urban,CA", Reason.WRONG_FIELD_COUNT),
    ("U,1,2024-01-31,Urban,CA,West,1000,Retail,N,Y,extra", Reason.WRONG_FIELD_COUNT),
    ("U,,2024-01-31,Urban,CA,West,1000,Retail,N,Y", Reason.EMPTY_KEY),
    ("U,   ,2024-01-31,Urban,CA,West,1000,Retail,N,Y", Reason.EMPTY_KEY),
    ("U,abc,2024-01-31,Urban,CA,West,1000,Retail,N,Y", Reason.BAD_INTEGER),
    ("U,2147483648,2024-01-31,Urban,CA,West,1000,Retail,N,Y", Reason.BAD_INTEGER),
    ("U,1,2024-01-31,Urban,CA,West,lots,Retail,N,Y", Reason.BAD_INTEGER),
    ("U,1,2024-01-31,Urban,CA,West,1.5,Retail,N,Y", Reason.BAD_INTEGER),
    ("U,1,2024-01-31,Urban,CA,West,2147483648,Retail,N,Y", Reason.BAD_INTEGER),
    ("U,1,2024-01-31,Urban,CA,West,-2147483649,Retail,N,Y", Reason.BAD_INTEGER),
    ("U,1,2024-01-31,Urban,CA,West,99999999999,Retail,N,Y", Reason.BAD_INTEGER),
    ("U,1,2024-02-30,Urban,CA,West,1000,Retail,N,Y", Reason.BAD_DATE),
    ("U,1,2024-13-45,Urban,CA,West,1000,Retail,N,Y", Reason.BAD_DATE),
    ("U,1,2023-02-29,Urban,CA,West,1000,Retail,N,Y", Reason.BAD_DATE),
    ("U,1,31/01/2024,Urban,CA,West,1000,Retail,N,Y", Reason.BAD_DATE),
    ("U,1,tomorrow,Urban,CA,West,1000,Retail,N,Y", Reason.BAD_DATE),
    ("U,1,2024-01-31,Urban,CA,West,1000,Retail,maybe,Y", Reason.BAD_FLAG),
    ("U,1,2024-01-31,Urban,CA,West,1000,Retail,N,", Reason.BAD_FLAG),
    ("U,1,2024-01-31,Urban,CA,West,1000,Retail,N,YES", Reason.BAD_FLAG),
    ("X,1,2024-01-31,Urban,CA,West,1000,Retail,N,Y", Reason.UNKNOWN_OPERATION),
    (",1,2024-01-31,Urban,CA,West,1000,Retail,N,Y", Reason.UNKNOWN_OPERATION),
    ("Insert,1,2024-01-31,Urban,CA,West,1000,Retail,N,Y", Reason.UNKNOWN_OPERATION),
])
def test_each_bad_row_class_gets_its_reason(line: str, reason: Reason) -> None:
    assert reason_of(line) == reason.value


@pytest.mark.parametrize("line", [
    "U,1,2024-01-31,Urban,CA,West,1000,Retail,N,Y",
    "I,2147483647,2024-02-29,Urban,CA,West,-2147483648,Retail,y,n",  # int32 bounds, leap day
    "u, 7 ,2024-01-31, Urban ,CA,West,+5,Retail, N , Y ",  # lower-case op, padded values
    "U,1,,,,,,,N,N",  # optional values may be empty
    "I,+7,2024-01-31,Urban,CA,West,007,Retail,N,Y",  # explicit sign, leading zeros
])
def test_good_rows_pass(line: str) -> None:
    assert reason_of(line) is None


def test_first_failing_rule_wins_and_detail_names_the_value() -> None:
    parsed = cdc("U,1,2024-02-30,Urban,CA,West,lots,Retail,Q,Y\n")
    _, invalid = validate(parsed.rows, None)
    assert invalid.reasons == [Reason.BAD_INTEGER.value]
    assert invalid.details == ["insured_value=lots"]


def test_valid_rows_are_typed_trimmed_and_flags_upper_cased() -> None:
    valid, reasons, _ = check_cdc("u, 7 ,2024-02-29, Urban ,CA,West,+5,Retail,y,n\nI,8,,,,,,,N,N\n")
    assert reasons == {}
    assert valid[0] == {
        "policy_id": 7, "expiry_date": dt.date(2024, 2, 29), "location_name": "Urban", "state_code": "CA",
        "region_name": "West", "insured_value": 5, "business_type": "Retail",
        "earthquake_coverage": "Y", "flood_coverage": "N", "is_flagged": None, "_operation": "U", RECORD: 1,
    }  # a v1 row: contract v2's is_flagged is NULL
    # empty optional values become NULL
    assert valid[1]["expiry_date"] is None and valid[1]["insured_value"] is None
    assert valid[1]["location_name"] is None and valid[1]["_operation"] == "I"


def test_a_short_first_record_beside_one_good_one_does_not_decide_the_shape() -> None:
    """Found by the model-based test: a 5-field record then a 10-field delete tied, and the short
    one won, so the whole file was parsed as no declared shape and refused."""
    data = b"I,3,2024-01-31,Urban,CA\nd,3,,,,,,,,\n"
    assert file_shape(data).fields == 5  # a tie goes to the first count seen, when nothing is declared
    assert file_shape(data, {10, 11}).fields == 10
    assert file_shape(b"I,1,a\nI,2,b\n" + b"D,3,,,,,,,,\n", {10, 11}).fields == 3  # the most common still wins


def test_delete_rows_only_need_a_valid_key() -> None:
    valid, reasons, _ = check_cdc(
        "D,1,,,,,,,,\n"                                   # nothing but the key
        "D,2,2024-13-45,x,y,z,lots,w,maybe,?\n"          # every other field invalid
        "D,,2024-01-31,Urban,CA,West,1000,Retail,N,Y\n"  # no key
        "D,x1,2024-01-31,Urban,CA,West,1000,Retail,N,Y\n"  # bad key
        "D,3,2024-01-31\n"                                # wrong field count still applies
    )
    assert [(r["policy_id"], r["_operation"]) for r in valid] == [(1, "D"), (2, "D")]
    assert reasons == {3: Reason.EMPTY_KEY.value, 4: Reason.BAD_INTEGER.value, 5: Reason.WRONG_FIELD_COUNT.value}


def test_full_load_rows_take_the_fixed_operation() -> None:
    parsed = full(f"{HEADER}\n1,{GOOD}\n2,2024-02-30,Urban,CA,West,1,Retail,N,Y\n")
    assert parsed.header == DATA_COLUMN_NAMES
    valid, invalid = validate(parsed.rows, "L")
    assert valid["_operation"].to_pylist() == ["L"]
    assert valid[RECORD].to_pylist() == [2]  # the header is record 1
    assert invalid.records.tolist() == [3] and invalid.reasons == [Reason.BAD_DATE.value]


def test_full_load_header_with_wrong_field_count_is_kept_as_header() -> None:
    parsed = full(f"policy_id,expiry_date\n1,{GOOD}\n")
    assert parsed.header == []  # not the contract's header: the pipeline rejects the file
    assert len(parsed.rejected) == 0
    assert parsed.rows[RECORD].to_pylist() == [2]
    assert parsed.record_count == 1


# --- CSV shapes ----------------------------------------------------------------------

def test_quoted_fields_with_commas_and_newlines() -> None:
    valid, reasons, _ = check_cdc(
        'I,1,2024-01-31,"Urban, downtown",CA,West,1000,"Retail, ""big""",N,Y\n'
        'I,2,2024-01-31,"two\nlines",CA,West,1000,Retail,N,Y\n'
    )
    assert reasons == {}
    assert valid[0]["location_name"] == "Urban, downtown"
    assert valid[0]["business_type"] == 'Retail, "big"'
    assert valid[1]["location_name"] == "two\nlines"


def test_crlf_and_blank_lines() -> None:
    text = (f"\r\nI,1,{GOOD}\r\n\r\n\r\nI,2,{GOOD}\r\n\nU,3,2024-13-45,Urban,CA,West,1,Retail,N,Y\r\n")
    valid, reasons, parsed = check_cdc(text)
    assert [r["policy_id"] for r in valid] == [1, 2]
    assert valid[0]["flood_coverage"] == "Y"  # no trailing \r in the last field
    assert parsed.record_count == 3  # blank lines are not records
    assert reasons == {3: Reason.BAD_DATE.value}
    lines = parsed.lines()
    assert lines.count == 3
    assert parsed.line_numbers(np.array([1, 2, 3])).tolist() == [2, 5, 7]
    assert lines.text(3) == "U,3,2024-13-45,Urban,CA,West,1,Retail,N,Y"


def test_no_trailing_newline() -> None:
    valid, reasons, parsed = check_cdc(f"I,1,{GOOD}\nI,2,{GOOD}")
    assert [r["policy_id"] for r in valid] == [1, 2] and reasons == {}
    assert parsed.lines().text(2) == f"I,2,{GOOD}"


def test_record_lines_after_a_multi_line_quoted_record() -> None:
    text = (
        f"I,1,{GOOD}\n"                                            # line 1
        'I,2,2024-01-31,"three\nline\nvalue",CA,West,1,Retail,N,Y\n'  # lines 2-4
        "\n"                                                        # line 5 (blank)
        "U,3,2024-02-30,Urban,CA,West,1,Retail,N,Y\n"               # line 6
        'I,4,2024-01-31,"a ""quoted""\nvalue",CA\n'                  # lines 7-8, wrong field count
        "I,5,2024-01-31,Urban,CA,West,1,Retail,maybe,Y\n"           # line 9
    )
    valid, reasons, parsed = check_cdc(text)
    assert [r["policy_id"] for r in valid] == [1, 2]
    assert reasons == {3: Reason.BAD_DATE.value, 4: Reason.WRONG_FIELD_COUNT.value, 5: Reason.BAD_FLAG.value}
    lines = RecordLines(text.encode())
    assert lines.count == 5
    assert lines.line_numbers(np.array([1, 2, 3, 4, 5])).tolist() == [1, 2, 6, 7, 9]
    assert parsed.line_numbers(np.array([3, 4, 5])).tolist() == [6, 7, 9]
    assert lines.text(2) == 'I,2,2024-01-31,"three\nline\nvalue",CA,West,1,Retail,N,Y'
    assert lines.text(3) == "U,3,2024-02-30,Urban,CA,West,1,Retail,N,Y"
    assert lines.text(4) == 'I,4,2024-01-31,"a ""quoted""\nvalue",CA'
    assert lines.line_number(5) == 9


def test_record_lines_without_quotes_is_the_fast_path() -> None:
    text = f"I,1,{GOOD}\nI,2,{GOOD}\nI,3,{GOOD}\n"
    parsed = cdc(text)
    assert parsed.line_numbers(np.array([1, 3])).tolist() == [1, 3]
    assert RecordLines(text.encode()).line_numbers(np.array([1, 3])).tolist() == [1, 3]


@pytest.mark.parametrize(("text", "lines"), [
    (f'"{HEADER.replace(",", chr(34) + "," + chr(34))}"\n1,{GOOD}\n2,{GOOD}\n', [2, 3]),  # quoted header
    (f"{HEADER}\r\n1,{GOOD}\r\n2,{GOOD}", [2, 3]),                                    # CRLF, no last line end
    (f"{HEADER}\n1,{GOOD}\n\n2,{GOOD}\n", [2, 4]),                                      # a blank line
    (f'{HEADER}\n1,2024-01-31,"two\nlines",CA,West,1,Retail,N,Y\n2,{GOOD}\n', [2, 4]),   # a record on two lines
    (f"{HEADER}\r1,{GOOD}\r2,{GOOD}\r", [2, 3]),                                         # lone CR line ends
])
def test_line_numbers_of_a_clean_file_survive_forgetting_its_text(text: str, lines: list[int]) -> None:
    parsed = full(text)
    valid, invalid = validate(parsed.rows, "L")
    assert len(parsed.rejected) == len(invalid) == 0
    count = parsed.record_count
    parsed.release()
    assert parsed.data == b"" and parsed.rows.num_rows == 0 and parsed.record_count == count
    assert parsed.line_numbers(valid[RECORD].to_numpy()).tolist() == lines


def test_one_latin1_byte_rejects_only_its_row() -> None:
    data = (f"I,1,{GOOD}\n".encode() + b"I,2,2024-01-31,Caf\xe9,CA,West,1,Retail,N,Y\n\n"
            + f"I,3,{GOOD}\n".encode())
    valid, reasons, parsed = check_cdc(data)
    assert [r["policy_id"] for r in valid] == [1, 3]
    assert reasons == {2: Reason.BAD_ENCODING.value}
    assert "not UTF-8: byte 0xE9" in parsed.rejected.details[0]
    assert parsed.line_numbers(np.array([1, 2, 3])).tolist() == [1, 2, 4]
    assert parsed.lines().text(2) == "I,2,2024-01-31,Caf\ufffd,CA,West,1,Retail,N,Y"


def test_non_utf8_full_load_keeps_its_header_and_good_rows() -> None:
    parsed = full(f"{HEADER}\n1,{GOOD}\n".encode() + b"2,2024-01-31,\xff\xfe,CA,West,1,Retail,N,Y\n")
    assert parsed.header == DATA_COLUMN_NAMES
    assert parsed.rows["policy_id"].to_pylist() == ["1"]
    assert parsed.rejected.records.tolist() == [3] and parsed.rejected.reasons == [Reason.BAD_ENCODING.value]
    assert parsed.record_count == 2


@pytest.mark.parametrize("data", [
    bytes(range(256)) * 4,
    b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xcbH\xcd\xc9\xc9\x07\x00\x86\xa6\x106\x05\x00\x00\x00",  # gzip
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01",
    bytes(random.Random(7).randrange(256) for _ in range(4000)),
], ids=["every-byte", "gzip", "png", "random"])
def test_binary_garbage_is_quarantined_with_a_reason(data: bytes, capfd: pytest.CaptureFixture[str]) -> None:
    valid, reasons, parsed = check_cdc(data)
    assert valid == [] and reasons  # every record rejected, none applied
    assert set(reasons.values()) <= {Reason.BAD_ENCODING.value, Reason.WRONG_FIELD_COUNT.value,
                                     Reason.UNTERMINATED_QUOTE.value}
    assert Reason.BAD_ENCODING.value in reasons.values()
    for record in reasons:
        parsed.lines().text(record), parsed.lines().line_number(record)  # raw text and line of each
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err and "UnicodeDecodeError" not in captured.err


def test_text_that_is_not_csv_is_all_wrong_field_count() -> None:
    valid, reasons, parsed = check_cdc("hello world\nthis is not a csv file\n")
    assert valid == []
    assert reasons == {1: Reason.WRONG_FIELD_COUNT.value, 2: Reason.WRONG_FIELD_COUNT.value}


@pytest.mark.parametrize("data", [b"", b"\n", b"\r\n\r\n\n"])
def test_empty_file_has_no_records(data: bytes) -> None:
    parsed = cdc(data)
    assert parsed.record_count == 0 and parsed.rows.num_rows == 0 and len(parsed.rejected) == 0


def test_stray_quote_inside_an_unquoted_value() -> None:
    # a quote that does not start a field is a literal: it must not shift later line numbers
    text = (f'I,1,2024-01-31,5" pipe,CA,West,1,Retail,N,Y\nI,2,{GOOD}\n'
            'U,3,2024-02-30,Urban,CA,West,1,Retail,N,Y\n')
    valid, reasons, parsed = check_cdc(text)
    assert valid[0]["location_name"] == '5" pipe'
    assert reasons == {3: Reason.BAD_DATE.value}
    assert parsed.lines().line_number(3) == 3
    assert parsed.lines().text(3) == "U,3,2024-02-30,Urban,CA,West,1,Retail,N,Y"


def test_lone_cr_line_ends() -> None:
    text = f"I,1,{GOOD}\rU,2,2024-02-30,Urban,CA,West,1,Retail,N,Y\r\rI,3,{GOOD}\r"
    valid, reasons, parsed = check_cdc(text)
    assert [r["policy_id"] for r in valid] == [1, 3]
    assert reasons == {2: Reason.BAD_DATE.value}
    assert parsed.line_numbers(np.array([1, 2, 3])).tolist() == [1, 2, 4]
    assert parsed.lines().text(2) == "U,2,2024-02-30,Urban,CA,West,1,Retail,N,Y"


# --- bad bytes (issue 5, point 4) ---------------------------------------------------

def test_an_unterminated_quote_rejects_only_its_line() -> None:
    text = (f"I,1,{GOOD}\n"
            f'I,2,"oops,{GOOD}\n'          # the quote never closes
            f"I,3,{GOOD}\n"
            f"U,1,{GOOD}\n")
    valid, reasons, parsed = check_cdc(text)
    assert [(r["_operation"], r["policy_id"]) for r in valid] == [("I", 1), ("I", 3), ("U", 1)]
    assert reasons == {2: Reason.UNTERMINATED_QUOTE.value}
    assert parsed.lines().text(2) == f'I,2,"oops,{GOOD}'
    assert parsed.line_numbers(np.array([1, 2, 3, 4])).tolist() == [1, 2, 3, 4]


def test_an_unterminated_quote_in_the_last_field_does_not_swallow_the_file() -> None:
    # the runaway record has the right field count: only its open quote at the end gives it away
    text = f'I,1,{GOOD}\nI,2,2024-01-31,Urban,CA,West,1,Retail,N,"Y\nI,3,{GOOD}\nI,4,{GOOD}\n'
    valid, reasons, _ = check_cdc(text)
    assert [r["policy_id"] for r in valid] == [1, 3, 4]
    assert reasons == {2: Reason.UNTERMINATED_QUOTE.value}


def test_a_later_quote_does_not_close_an_unterminated_one() -> None:
    # read as CSV, line 2's quote closes at line 4's: lines 2-4 are one record with the wrong
    # field count. Only line 2 is rejected; line 4's quote sits inside a value, a literal.
    text = (f'I,1,{GOOD}\nI,2,"open,{GOOD}\nI,3,{GOOD}\nI,4,2024-01-31,Urban",CA,West,1,Retail,N,Y\n'
            f"I,5,{GOOD}\n")
    valid, reasons, parsed = check_cdc(text)
    assert [r["policy_id"] for r in valid] == [1, 3, 4, 5]
    assert valid[2]["location_name"] == 'Urban"'
    assert reasons == {2: Reason.UNTERMINATED_QUOTE.value}


def test_a_big_file_with_one_unterminated_quote_keeps_every_later_row() -> None:
    rows = [f"I,{k},{GOOD}" for k in range(1, 5001)]
    rows[99] = f'I,100,"{GOOD}'
    valid, reasons, _ = check_cdc("\n".join(rows) + "\n")
    assert len(valid) == 4999 and reasons == {100: Reason.UNTERMINATED_QUOTE.value}


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_multi_line_records_keep_the_line_they_start_on(newline: str) -> None:
    text = newline.join([
        'I,1,2024-01-31,5" pipe,CA,West,1,Retail,N,Y',         # line 1: a literal quote
        'I,2,2024-01-31,"Two',                                    # lines 2-3: one record
        'Lines",CA,West,1,Retail,N,Y',
        f"I,3,{GOOD}",                                            # line 4
        "U,4,2024-02-30,Urban,CA,West,1,Retail,N,Y",              # line 5: rejected
    ]) + newline
    valid, reasons, parsed = check_cdc(text)
    assert [r["policy_id"] for r in valid] == [1, 2, 3] and reasons == {4: Reason.BAD_DATE.value}
    assert valid[1]["location_name"] == f"Two{newline}Lines"
    assert parsed.line_numbers(np.array([1, 2, 3, 4])).tolist() == [1, 2, 4, 5]
    assert parsed.lines().text(4) == "U,4,2024-02-30,Urban,CA,West,1,Retail,N,Y"


def test_a_negative_key_is_rejected() -> None:
    assert reason_of(f"I,-5,{GOOD}") == Reason.NEGATIVE_KEY.value
    assert reason_of(f"D,-5,{GOOD}") == Reason.NEGATIVE_KEY.value
    assert reason_of(f"I,-0,{GOOD}") is None and reason_of(f"I,0,{GOOD}") is None


# --- the fast path for clean columns gives the same verdicts as the value-by-value checks ---

EDGE_KEYS = ["7", "0", "007", "2147483647", "2147483648", "4294967296", "9999999999", "99999999999", "0x10",
             "+7", "-0", "-7", "1.5", " 7", "7 ", "\u00a07", "٣", "", "1e3"]
EDGE_DATES = ["2024-02-29", "2023-02-29", "2024-02-30", "2024-13-01", "0000-01-01", "9999-12-31", "2024-1-05",
              "+024-01-01", "2024-01-01 ", " 2024-01-01", "20240101xx", "2024/01/01", "", "2024-01-0a"]
EDGE_FLAGS = ["Y", "N", "y", "n", " Y", "YES", "", "Ｙ"]


@pytest.mark.parametrize(("column", "values"), [
    ("policy_id", EDGE_KEYS), ("insured_value", EDGE_KEYS), ("expiry_date", EDGE_DATES),
    ("earthquake_coverage", EDGE_FLAGS), ("location_name", ["x", " x ", "", "\u00a0x", "é"]),
])
def test_a_value_gets_the_same_verdict_alone_and_among_dirty_values(column: str, values: list[str]) -> None:
    """Alone, a clean value takes the column's fast path; next to a dirty one, the checks
    value by value. Both must accept, type and reject it alike."""
    def verdict(value: str, neighbour: str | None):
        rows = {name: ["1", "2024-01-31", "Urban", "CA", "West", "1000", "Retail", "N", "Y"][i]
                for i, name in enumerate(DATA_COLUMN_NAMES)}
        lines = []
        for v in [value] + ([neighbour] if neighbour is not None else []):
            fields = dict(rows, **{column: v})
            lines.append(",".join(f'"{fields[n]}"' for n in DATA_COLUMN_NAMES))
        parsed = full(HEADER + "\n" + "\n".join(lines) + "\n")
        valid, invalid = validate(parsed.rows, "L")
        valid = valid.set_column(1, "expiry_date", valid["expiry_date"].cast(pa.string()))  # year 0 is no Python date
        first = valid.filter(pa.compute.equal(valid[RECORD], 2)).to_pylist()
        return (first[0] if first else None), dict(zip(invalid.records.tolist(), zip(invalid.reasons, invalid.details))).get(2)

    dirty = {"policy_id": "x", "insured_value": "x", "expiry_date": "x", "earthquake_coverage": "x",
             "location_name": " padded "}[column]
    for value in values:  # alone, or beside an empty value (NULL), which keeps a column on its fast path
        assert verdict(value, None) == verdict(value, dirty) == verdict(value, ""), value


def test_the_shape_comes_from_complete_records_past_the_first_sample() -> None:
    """A first record longer than the 64 KiB sample left only a cut record to judge by."""
    long_row = "I,1,2024-01-31," + "x" * 100_000 + ",CA,West,1,Retail,N,N\n"
    data = (long_row + "I,2,2024-01-31,Urban,CA,West,2,Retail,N,N\n" * 3).encode()
    assert file_shape(data, {10, 11}).fields == 10
    header = "policy_id," + "y" * 70_000 + ",expiry_date\n"
    assert file_shape((header + "1,a,b\n").encode()).header == ["policy_id", "y" * 70_000, "expiry_date"]
    huge = ("I,1," + "x" * (1 << 20) + "\n").encode() * 20  # records past every bound: judged by what is complete
    assert file_shape(huge).fields == 3
