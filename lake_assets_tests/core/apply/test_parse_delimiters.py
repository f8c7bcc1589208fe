"""A source's declared delimiter (DMS's CsvDelimiter): a file written with `|`, `;` or a tab
parses to what the same file written with `,` does, records, refusals and line numbers alike.

The comma parse is tested at length in insurance/test_parse_validate.py; here it is the oracle,
and Python's csv module is a second one for the clean files.
"""

import csv
import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lake_assets.core.apply.parse import RECORD, parse_csv
from lake_assets.core.declaration import RefusalReason as Reason

pytestmark = pytest.mark.unit

NAMES = ["op", "id", "name", "note"]
GOOD = "x,y"
DELIMITERS = ["|", ";", "\t"]

#: Files the comma parser has a verdict on, each with its rule: clean, quoted, dirty.
TEXTS = {
    "clean": "I,1,x,y\nU,2,a,b\nD,3,,\n",
    "quoted values with the delimiter, quotes and a line break": 'I,1,"a,b","say ""hi"""\nI,2,"two\nlines",z\n',
    "a wrong field count": f"I,1,{GOOD}\nI,2,x\nI,3,{GOOD},extra\nI,4,{GOOD}\n",
    "an unterminated quote": f'I,1,{GOOD}\nI,2,"oops,{GOOD}\nI,3,{GOOD}\nU,1,{GOOD}\n',
    "a runaway quote in the last field": f'I,1,{GOOD}\nI,2,x,"y\nI,3,{GOOD}\nI,4,{GOOD}\n',
    "a stray quote inside a value": f'I,1,5" pipe,y\nI,2,{GOOD}\n',
    "CRLF and blank lines": f"I,1,{GOOD}\r\n\r\nI,2,{GOOD}\r\n",
    "no line end at the end": f"I,1,{GOOD}\nI,2,{GOOD}",
    "a latin-1 byte": f"I,1,{GOOD}\nI,2,caf\xe9,y\nI,3,{GOOD}\n",
}


def _parse(text: str, delimiter: str):
    data = text.replace(",", delimiter).encode("latin-1" if "\xe9" in text else "utf-8")
    return parse_csv("raw/t/f.csv", "etag", data, NAMES, has_header=False, delimiter=delimiter)


def _verdict(parsed, delimiter: str) -> tuple:
    """Everything a run takes from a parse, with the delimiter written back as `,`."""
    rows = [tuple(r[c].replace(delimiter, ",") for c in NAMES) + (r[RECORD],) for r in parsed.rows.to_pylist()]
    records = parsed.rejected.records
    texts = [parsed.lines().text(int(r)).replace(delimiter, ",") for r in records]
    return (rows, records.tolist(), parsed.rejected.reasons, parsed.line_numbers(records).tolist(), texts,
            parsed.record_count)


@pytest.mark.parametrize("delimiter", DELIMITERS)
@pytest.mark.parametrize("case", list(TEXTS))
def test_a_file_parses_as_the_same_file_written_with_commas(case: str, delimiter: str) -> None:
    text = TEXTS[case]
    assert _verdict(_parse(text, delimiter), delimiter) == _verdict(_parse(text, ","), ",")


def test_the_dirty_cases_have_the_verdicts_their_rules_give() -> None:
    """The oracle's own verdicts, so that two equally wrong parses cannot pass the test above."""
    reasons = {case: dict(zip(_parse(text, "|").rejected.records.tolist(), _parse(text, "|").rejected.reasons))
               for case, text in TEXTS.items()}
    assert reasons["clean"] == {} and reasons["quoted values with the delimiter, quotes and a line break"] == {}
    assert reasons["a wrong field count"] == {2: Reason.WRONG_FIELD_COUNT.value, 3: Reason.WRONG_FIELD_COUNT.value}
    assert reasons["an unterminated quote"] == {2: Reason.UNTERMINATED_QUOTE.value}
    assert reasons["a runaway quote in the last field"] == {2: Reason.UNTERMINATED_QUOTE.value}
    assert reasons["a latin-1 byte"] == {2: Reason.BAD_ENCODING.value}
    quoted = _parse(TEXTS["quoted values with the delimiter, quotes and a line break"], "|")
    assert quoted.rows["name"].to_pylist() == ["a|b", "two\nlines"] and quoted.rows["note"][0].as_py() == 'say "hi"'


def test_a_comma_is_data_in_a_file_of_another_delimiter() -> None:
    parsed = parse_csv("raw/t/f.dat", "etag", b"I|1|Smith, John|a,b\n", NAMES, has_header=False, delimiter="|")
    assert parsed.rows.select(NAMES).to_pylist() == [{"op": "I", "id": "1", "name": "Smith, John", "note": "a,b"}]
    assert len(parsed.rejected) == 0


_VALUE = st.text(st.characters(codec="utf-8", exclude_characters="\r\x00"), max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_VALUE, _VALUE, _VALUE, _VALUE), min_size=1, max_size=12), st.sampled_from(DELIMITERS))
def test_any_rows_a_csv_writer_writes_with_the_delimiter_read_back_whole(rows: list[tuple], delimiter: str) -> None:
    rows = [r for r in rows if any(r)]  # an all-empty record is a blank line: no record at all
    out = io.StringIO(newline="")
    csv.writer(out, delimiter=delimiter, lineterminator="\n").writerows(rows)
    parsed = parse_csv("raw/t/f.csv", "etag", out.getvalue().encode(), NAMES, has_header=False, delimiter=delimiter)
    expected = list(csv.reader(io.StringIO(out.getvalue(), newline=""), delimiter=delimiter))
    assert [tuple(r[c] for c in NAMES) for r in parsed.rows.to_pylist()] == [tuple(r) for r in expected]
    assert [tuple(r) for r in expected] == rows
    assert len(parsed.rejected) == 0 and parsed.rows[RECORD].to_pylist() == list(range(1, len(rows) + 1))
    assert parsed.line_numbers(np.arange(1, len(rows) + 1)).tolist() == \
        [1 + i + sum(v.count("\n") for r in rows[:i] for v in r) for i in range(len(rows))]
