"""The typed checks of the reader's validation, per column type, on the values a CSV holds."""

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lake_assets.core.apply.reader import RECORD
from lake_assets.core.apply.validate import (_numbers_by_pattern, _plain_numbers, _plain_timestamps,
                                             _timestamps_by_pattern, validate)
from lake_assets.core.declaration import DeclarationError
from lake_assets.core.registry import parse

pytestmark = pytest.mark.unit

DECLARED = parse("""
name: stamped
group: stamped
keys: [id]
columns:
  - {name: id, type: INT, nullable: false}
  - {name: at, type: TIMESTAMP}
sources:
  - {prefix: raw/stamped/fullload/, kind: snapshot}
""", "test")
UTC = dt.timezone.utc


def _validated(values: list[str]) -> tuple[dict[int, dt.datetime | None], dict[int, str]]:
    rows = pa.table({"id": [str(i) for i in range(len(values))], "at": values, RECORD: list(range(len(values)))})
    valid, refused = validate(DECLARED, rows, "L")
    kept = dict(zip(valid["id"].to_pylist(), valid["at"].to_pylist()))
    return kept, {int(r): reason for r, reason in zip(refused.records, refused.reasons)}


def test_a_timestamp_is_read_in_each_documented_form() -> None:
    kept, refused = _validated(["2024-04-01 10:00:00", "2024-04-01T10:00:00Z", "2024-04-01 10:00:00.5",
                                "2024-04-01T10:00:00.123456+00:00", "2024-04-01 23:59:59-0000", ""])
    assert refused == {}
    assert kept == {0: dt.datetime(2024, 4, 1, 10, tzinfo=UTC), 1: dt.datetime(2024, 4, 1, 10, tzinfo=UTC),
                    2: dt.datetime(2024, 4, 1, 10, 0, 0, 500000, tzinfo=UTC),
                    3: dt.datetime(2024, 4, 1, 10, 0, 0, 123456, tzinfo=UTC),
                    4: dt.datetime(2024, 4, 1, 23, 59, 59, tzinfo=UTC), 5: None}


def test_a_malformed_timestamp_or_another_offset_is_quarantined_not_a_crash() -> None:
    kept, refused = _validated(["2024-04-01T10:00:00+02:00", "2024-02-30 10:00:00", "2024-04-01 24:00:00",
                                "yesterday", "2024-04-01 10:00:00.1234567", "2024-04-01 10:00:00"])
    assert refused == {0: "bad_timestamp", 1: "bad_timestamp", 2: "bad_timestamp", 3: "bad_timestamp",
                       4: "bad_timestamp"}
    assert kept == {5: dt.datetime(2024, 4, 1, 10, tzinfo=UTC)}


CODED = parse("""
name: coded
group: coded
keys: [id]
columns:
  - {name: id, type: INT, nullable: false}
  - {name: state, type: STRING, pattern: "[A-Z]{2}"}
  - {name: ref, type: STRING, pattern: "ORD-[0-9]+|NONE", reason: bad_flag}
sources:
  - {prefix: raw/coded/fullload/, kind: snapshot}
""", "test")


def test_a_pattern_must_match_the_whole_trimmed_value() -> None:
    states = ["CA", " NY ", "", "Ca", "CAL", "xCA", "CA", "TX"]
    refs = ["ORD-1", "NONE", "ORD-22", "ORD-3", "ORD-4", "ORD-5", "ORD-", "NONE!"]
    rows = pa.table({"id": [str(i) for i in range(len(states))], "state": states, "ref": refs,
                     RECORD: list(range(len(states)))})
    valid, refused = validate(CODED, rows, "L")
    assert {int(r): reason for r, reason in zip(refused.records, refused.reasons)} == \
        {3: "bad_value", 4: "bad_value", 5: "bad_value", 6: "bad_flag", 7: "bad_flag"}
    assert dict(zip(valid["id"].to_pylist(), valid["state"].to_pylist())) == {0: "CA", 1: "NY", 2: None}


@pytest.mark.parametrize(("column", "message"), [
    ("{name: state, type: STRING, pattern: '[A-Z'}", "column state: pattern '[A-Z' is not an RE2 regular expression"),
    ("{name: state, type: STRING, pattern: '(?=A)A'}", "is not an RE2 regular expression"),  # no look-ahead in RE2
    ("{name: state, type: INT, pattern: '[0-9]+'}", "column state: pattern is for a STRING column"),
    ("{name: state, type: STRING, allowed: [CA], pattern: 'CA'}", "without allowed values"),
])
def test_a_pattern_the_engine_cannot_use_is_one_line_at_parse(column: str, message: str) -> None:
    text = f"""
name: coded
group: coded
keys: [id]
columns:
  - {{name: id, type: INT, nullable: false}}
  - {column}
sources:
  - {{prefix: raw/coded/fullload/, kind: snapshot}}
"""
    with pytest.raises(DeclarationError) as raised:
        parse(text, "coded.yaml")
    assert message in str(raised.value) and "\n" not in str(raised.value)


TEXTS = parse("""
name: texts
group: texts
keys: [id]
columns:
  - {name: id, type: INT, nullable: false}
  - {name: kept, type: STRING, trim: false}
  - {name: trimmed, type: STRING}
  - {name: code, type: STRING, trim: false, pattern: "[A-Z]{2}", nullable: false}
sources:
  - {prefix: raw/texts/fullload/, kind: snapshot}
""", "test")


def test_trim_false_keeps_a_value_as_written_and_judges_it_so() -> None:
    written = [" a b ", "  ", "", "x"]
    rows = pa.table({"id": ["1", "2", "3", "4"], "kept": written, "trimmed": written,
                     "code": ["AB", "AB", "AB", " AB"], RECORD: [1, 2, 3, 4]})
    valid, refused = validate(TEXTS, rows, "L")
    assert valid.select(["id", "kept", "trimmed"]).to_pylist() == [
        {"id": 1, "kept": " a b ", "trimmed": "a b"}, {"id": 2, "kept": "  ", "trimmed": None},
        {"id": 3, "kept": None, "trimmed": None}]  # only an empty value is NULL when kept as written
    assert [(int(r), reason) for r, reason in zip(refused.records, refused.reasons)] == [(4, "bad_value")]


@pytest.mark.parametrize("column", ["{name: n, type: INT, trim: false}",
                                    "{name: n, type: STRING, allowed: [A], trim: false}"])
def test_trim_false_is_for_free_text_only(column: str) -> None:
    with pytest.raises(DeclarationError, match="trim: false is for a STRING column without allowed values"):
        parse(f"""
name: texts
group: texts
keys: [id]
columns:
  - {{name: id, type: INT, nullable: false}}
  - {column}
sources:
  - {{prefix: raw/texts/fullload/, kind: snapshot}}
""", "test")


_NUMBERISH = st.text(st.sampled_from(list("0123456789.+-eE ,x")) | st.characters(codec="utf-8"), max_size=12)


_DECIMALS = st.from_regex(r"[+-]?[0-9]{0,9}\.?[0-9]{0,4}", fullmatch=True)
_EXPONENTS = st.from_regex(r"[+-]?[0-9]{1,4}(\.[0-9]{0,3})?[eE][+-]?[0-9]{1,2}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(st.lists(_NUMBERISH | _DECIMALS | _EXPONENTS, min_size=1, max_size=8),
       st.sampled_from([(7, 2), (10, 0), (12, 6), (38, 10), None]))
@example(["1e2", "1.5"], (7, 2)).via("an exponent Arrow reads")
@example(["1e2", "1.5"], None).via("an exponent in a DOUBLE column")
@example(["5.", ".5", "+1.5", "-.5", "", "00012.30"], (7, 2)).via("the pattern's plain forms")
@example(["5.", ".5", "+1.5", "-.5", "", "-0"], None).via("a DOUBLE's plain forms")
@example(["1.234", "1.230", "99999.99", "100000.00"], (7, 2)).via("a digit lost, or past the precision")
@example(["+", "-", ".", " 1", "1,5", "nan", "\u0661"], (10, 0)).via("not numbers")
@example(["nan", "inf", "-Infinity", "1.5"], None).via("what a DOUBLE cast reads and the pattern does not")
def test_the_number_fast_path_reads_what_the_pattern_reads(values: list[str], shape: tuple[int, int] | None) -> None:
    """A DECIMAL (`shape`: precision, scale) or DOUBLE (None) column cast at once (`_plain_numbers`)
    gets the values and verdicts the value-by-value path gives, and every column that path finds
    clean and made of digits, signs and points only takes the fast path."""
    column = pa.chunked_array([pa.array(values, pa.string())])
    kind, empty = (pa.decimal128(*shape) if shape else pa.float64()), pc.equal(column, "")
    by_pattern = _numbers_by_pattern(column, kind, empty)
    fast = _plain_numbers(column, kind, empty)
    if fast is not None:
        assert fast.values.to_pylist() == by_pattern.values.to_pylist() and by_pattern.malformed is None
    plain = all(c in "0123456789.+-" for v in values for c in v)
    assert (fast is not None) == (by_pattern.malformed is None and plain), (values, shape)


_STAMPS = st.from_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,7})?(Z|[+-]0[0-2]:?00)?",
                        fullmatch=True)
_REAL_STAMPS = st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)).map(
    lambda t: t.isoformat(sep=" ") if t.microsecond else t.isoformat(sep="T"))


@settings(max_examples=300, deadline=None)
@given(st.lists(_STAMPS | _REAL_STAMPS | st.just(""), min_size=1, max_size=6))
@example(["2024-02-30 10:00:00", "2024-04-01 10:00:00"]).via("a day that does not exist")
@example(["2024-04-01 24:00:00", "2024-04-01 23:59:60", "2024-04-01 10:60:00"]).via("times that do not exist")
@example(["2024-13-01 00:00:00", "2024-00-10 00:00:00", "2024-01-00 00:00:00"]).via("months and days out of range")
@example(["0000-01-01 00:00:00", "9999-12-31 23:59:59.999999", "2024-02-29 00:00:00", "2023-02-29 00:00:00"])
@example(["2024-04-01T10:00:00", "2024-04-01 10:00:00.5", ""]).via("the plain forms")
@example(["2024-04-01T10:00:00Z", "2024-04-01 10:00:00+00:00"]).via("a zone: value by value")
@example(["2024-04-01 10:00", "2024-04-01"]).via("shapes Arrow's cast reads and the pattern refuses")
def test_the_timestamp_fast_path_reads_what_the_pattern_reads(values: list[str]) -> None:
    """A TIMESTAMP column cast at once (`_plain_timestamps`) gets the values and verdicts the value-by-value
    path gives, and every column that path finds clean and without a zone takes the fast path."""
    column = pa.chunked_array([pa.array(values, pa.string())])
    empty = pc.equal(column, "")
    by_pattern = _timestamps_by_pattern(column, empty)
    fast = _plain_timestamps(column, empty)
    if fast is not None:
        assert fast.values.to_pylist() == by_pattern.values.to_pylist() and by_pattern.malformed is None
    zoneless = not any(v.endswith("Z") or "+" in v or v[19:].count("-") for v in values)
    assert (fast is not None) == (by_pattern.malformed is None and zoneless), values
