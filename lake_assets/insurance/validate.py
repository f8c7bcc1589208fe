"""Contract rules on parsed rows: string columns in, typed valid rows and rejected records out.

Vectorised with pyarrow compute and no per-row Python. A row gets the first reason that
applies, in the order of `_rules`. Delete rows only need a valid key: the other fields of
a delete are not applied. A file of an older contract version lacks the columns later
versions added: they are NULL in its rows.

Clean columns take a fast path: a column whose values all have no surrounding whitespace
is not trimmed (a look at each value's first and last byte says so); an integer column of
plain digits is cast at once, without the regular expressions; a date column whose values
all cast as `YYYY-MM-DD` dates is cast at once. Any other column is checked value by
value with the same rules, so both paths accept and reject exactly the same values.
"""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_assets.insurance.contract import (
    BOOLEAN_VALUES,
    FLAG_COLUMNS,
    KEY,
    OPERATIONS,
    Reason,
    current,
)
from lake_assets.insurance.parse import RECORD, Rejected

INTEGER_PATTERN = r"^[+-]?[0-9]{1,10}$"
DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
NEGATIVE_PATTERN = r"^-0*[1-9]"  # policy ids are never negative (-0 is 0)
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
DATE_LENGTH = len("YYYY-MM-DD")


def validate(rows: pa.Table, operation: str | None) -> tuple[pa.Table, Rejected]:
    """Split `rows` into typed valid rows (with `_operation` and RECORD) and rejections.

    `operation` is the one operation of every row: a full load's, or `I` for CDC rows
    written without theirs (DMS's CdcInsertsOnly); None means the rows carry it in an `op`
    column (CDC: I, U or D). Rows carrying an `op` beside a fixed operation (a full load
    written with DMS's IncludeOpForFullLoad) must say `I`.
    """
    trimmed = {name: _trimmed(rows[name]) for name in rows.column_names if name != RECORD}
    written = pc.utf8_upper(trimmed["op"]) if "op" in trimmed else None
    if operation is None:
        assert written is not None, "rows without an `op` column need their operation given"
        ops = written
    else:
        ops = pa.repeat(operation, rows.num_rows)
    allowed = OPERATIONS if operation is None else ("I",)
    is_delete = pc.equal(ops, "D")

    # Each value is checked once; the checks also give the typed values of the valid rows.
    checked, typed = {}, {}
    for column in _columns_of(trimmed, pa.types.is_integer):
        checked[column], typed[column] = _int32(trimmed[column])
    checked["expiry_date"], typed["expiry_date"] = _date(trimmed["expiry_date"])
    for column in _columns_of(trimmed, pa.types.is_boolean):
        checked[column], typed[column] = _boolean(trimmed[column])
    flags, flag_checked = {}, {}
    for column in FLAG_COLUMNS:
        flags[column], flag_checked[column] = _flag(trimmed[column])
    reason = pa.nulls(rows.num_rows, pa.string())
    detail = pa.nulls(rows.num_rows, pa.string())
    for failed, code, column in _rules(trimmed, checked | flag_checked, written, allowed, is_delete):
        if failed is None:  # a rule no value of the column can break
            continue
        first = pc.and_(pc.is_null(reason), pc.fill_null(failed, False))
        if not pc.any(first).as_py():  # a clean column: nothing to record
            continue
        reason = pc.if_else(first, code.value, reason)
        if column:
            described = pc.binary_join_element_wise(f"{column}=", trimmed[column], "")
        else:
            described = pa.repeat(f"operation must be one of {', '.join(allowed)}", rows.num_rows)
        detail = pc.if_else(first, described, detail)

    bad = pc.is_valid(reason)
    any_bad = pc.any(bad).as_py()
    rejected = Rejected(
        rows[RECORD].filter(bad).to_numpy(),
        reason.filter(bad).to_pylist(),
        detail.filter(bad).to_pylist(),
    ) if any_bad else Rejected.empty()
    good = pc.invert(bad)
    columns = {}
    kept = rows.num_rows - len(rejected)
    for name, arrow_type in ((c.name, c.arrow_type) for c in current().columns):
        if name not in trimmed:  # a column of a later contract version than the file's
            columns[name] = pa.nulls(kept, arrow_type)
            continue
        if name in typed:
            values = typed[name]
        elif name in flags:
            values = flags[name]
        else:
            values = _string_or_null(trimmed[name])
        columns[name] = values.filter(good) if any_bad else values
    columns["_operation"] = ops.filter(good) if any_bad else ops
    columns[RECORD] = rows[RECORD].filter(good) if any_bad else rows[RECORD]
    return pa.table(columns), rejected


def _rules(values: dict[str, pa.Array], checked: dict[str, pa.Array | None], written: pa.Array | None,
           allowed: tuple[str, ...], is_delete: pa.Array):
    """(failed-mask or None, reason, column) in the order they are checked; `checked`
    holds each integer, date and flag column's "is well-formed" mask (None: all of them are);
    `written` the operations the rows carry (None: they carry none), each one of `allowed`."""
    if written is not None:
        yield pc.invert(pc.is_in(written, pa.array(allowed))), Reason.UNKNOWN_OPERATION, None
    key_checked = checked[KEY]
    yield (None if key_checked is None else pc.equal(values[KEY], "")), Reason.EMPTY_KEY, KEY
    yield (None if key_checked is None else pc.invert(key_checked)), Reason.BAD_INTEGER, KEY
    negative = None if key_checked is None else pc.match_substring_regex(values[KEY], NEGATIVE_PATTERN)
    yield negative, Reason.NEGATIVE_KEY, KEY  # the fast path takes digits only: never negative
    not_delete = pc.invert(is_delete)
    for column in _columns_of(values, pa.types.is_integer):
        if column != KEY and checked[column] is not None:
            present = pc.not_equal(values[column], "")
            yield pc.and_(not_delete, pc.and_(present, pc.invert(checked[column]))), Reason.BAD_INTEGER, column
    date = values["expiry_date"]
    if checked["expiry_date"] is not None:
        yield (pc.and_(not_delete, pc.and_(pc.not_equal(date, ""), pc.invert(checked["expiry_date"]))),
               Reason.BAD_DATE, "expiry_date")
    for column in FLAG_COLUMNS:
        if checked[column] is not None:
            yield pc.and_(not_delete, pc.invert(checked[column])), Reason.BAD_FLAG, column
    for column in _columns_of(values, pa.types.is_boolean):
        if checked[column] is not None:
            yield pc.and_(not_delete, pc.invert(checked[column])), Reason.BAD_BOOLEAN, column


def _columns_of(values: dict[str, pa.ChunkedArray], is_type) -> list[str]:  # a pa.types test
    """The newest contract's columns of a type that the file carries (an older version's
    file lacks the columns later ones added)."""
    return [c.name for c in current().columns if is_type(c.arrow_type) and c.name in values]


def _int32(values: pa.ChunkedArray) -> tuple[pa.Array | None, pa.Array]:
    """(well-formed mask, or None when every value is; int32 values, NULL where not well formed).

    Well formed: INTEGER_PATTERN and within int32. A column of plain digits (no sign, at
    most ten) is cast at once; any other goes through the pattern.
    """
    if len(values) and pc.all(pc.ascii_is_decimal(values)).as_py() \
            and pc.max(pc.binary_length(values)).as_py() <= 10:
        numbers = pc.cast(values, pa.int64())
        in_range = pc.less_equal(numbers, INT32_MAX)
        if pc.all(in_range).as_py():
            return None, pc.cast(numbers, pa.int32())
        return in_range, pc.cast(pc.if_else(in_range, numbers, pa.scalar(None, pa.int64())), pa.int32())
    shaped = pc.match_substring_regex(values, INTEGER_PATTERN)
    numbers = pc.cast(pc.if_else(shaped, _without_plus(values), "0"), pa.int64())
    in_range = pc.and_(pc.greater_equal(numbers, INT32_MIN), pc.less_equal(numbers, INT32_MAX))
    well_formed = pc.and_(shaped, in_range)
    return well_formed, pc.cast(pc.if_else(well_formed, numbers, pa.scalar(None, pa.int64())), pa.int32())


def _date(values: pa.ChunkedArray) -> tuple[pa.Array | None, pa.Array]:
    """(well-formed mask, or None when every value is; date32 values, NULL where not well formed).

    Well formed: DATE_PATTERN and a real day (2024-02-30 is not). A column of values that
    are all ten characters long and all cast as dates is cast at once.
    """
    if len(values) and pc.min(pc.binary_length(values)).as_py() == DATE_LENGTH \
            and pc.max(pc.binary_length(values)).as_py() == DATE_LENGTH:
        try:
            return None, pc.cast(values, pa.date32())
        except pa.ArrowInvalid:
            pass  # some value is not a date: check them one by one
    shaped = pc.match_substring_regex(values, DATE_PATTERN)
    parsed = pc.strptime(pc.if_else(shaped, values, "1970-01-01"), format="%Y-%m-%d", unit="s", error_is_null=True)
    # strptime rolls 2024-02-30 over to March: only a value that prints back unchanged is a date.
    # (Casting to date32 and back to string prints %Y-%m-%d like strftime, twenty times faster.)
    dates = pc.cast(parsed, pa.date32())
    well_formed = pc.fill_null(pc.and_(shaped, pc.equal(pc.cast(dates, pa.string()), values)), False)
    return well_formed, pc.if_else(well_formed, dates, pa.scalar(None, pa.date32()))


def _boolean(values: pa.ChunkedArray) -> tuple[pa.Array | None, pa.Array]:
    """(well-formed mask, or None when every value is; booleans, NULL where empty or not
    well formed). Well formed: empty, or one of BOOLEAN_VALUES' spellings in any case."""
    spelled = pc.utf8_lower(values)
    true = pc.is_in(spelled, _TRUE)
    well_formed = pc.or_(pc.or_(true, pc.is_in(spelled, _FALSE)), pc.equal(spelled, ""))
    booleans = pc.if_else(pc.and_(well_formed, pc.not_equal(spelled, "")), true, pa.scalar(None, pa.bool_()))
    return (None if pc.all(well_formed).as_py() else well_formed), booleans


_TRUE = pa.array([k for k, v in BOOLEAN_VALUES.items() if v])
_FALSE = pa.array([k for k, v in BOOLEAN_VALUES.items() if not v])


def _flag(values: pa.ChunkedArray) -> tuple[pa.ChunkedArray, pa.Array | None]:
    """(upper-cased flags; well-formed mask, or None when every value is `Y` or `N`)."""
    well_formed = pc.is_in(values, _FLAGS)
    if pc.all(well_formed).as_py():
        return values, None
    upper = pc.utf8_upper(values)
    return upper, pc.is_in(upper, _FLAGS)


_FLAGS = pa.array(["Y", "N"])


def _string_or_null(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """An empty string is NULL: the values' buffers, with a validity bitmap that says so
    (no copy of the strings; `pc.if_else` also mis-builds this on a sliced array)."""
    if not len(values) or pc.min(pc.binary_length(values)).as_py() > 0:
        return values
    chunks = []
    for chunk in values.chunks:
        present = np.concatenate([np.zeros(chunk.offset, bool), pc.fill_null(pc.not_equal(chunk, ""), False).to_numpy(zero_copy_only=False)])
        validity = pa.py_buffer(np.packbits(present, bitorder="little"))
        chunks.append(pa.Array.from_buffers(pa.string(), len(chunk), [validity, *chunk.buffers()[1:]],
                                            offset=chunk.offset))
    return pa.chunked_array(chunks, pa.string())


def _without_plus(values: pa.Array) -> pa.Array:
    """Arrow's string-to-int cast refuses a leading '+', which INTEGER_PATTERN allows."""
    if not pc.any(pc.starts_with(values, "+")).as_py():
        return values
    return pc.replace_substring_regex(values, pattern=r"^\+", replacement="")


def _trimmed(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """`values` without surrounding whitespace; not copied when no value has any."""
    return pc.utf8_trim_whitespace(values) if _may_need_trim(values) else values


def _may_need_trim(values: pa.ChunkedArray) -> bool:
    """True if some value may start or end with whitespace (by its first and last byte).

    An empty value has no bytes of its own: the bytes looked at for it are its
    neighbours', which are looked at anyway, so at worst a column is trimmed for nothing.
    """
    if values.type != pa.string():
        return True
    for chunk in values.chunks:
        _, offsets_buffer, data_buffer = chunk.buffers()
        if not len(chunk) or data_buffer is None:
            continue
        offsets = np.frombuffer(offsets_buffer, np.int32)[chunk.offset:chunk.offset + len(chunk) + 1]
        data = np.frombuffer(data_buffer, np.uint8)
        last = len(data) - 1
        if last < 0:
            continue
        firsts = data[np.minimum(offsets[:-1], last)]
        lasts = data[np.clip(offsets[1:] - 1, 0, last)]
        if ((firsts - np.uint8(0x21)) >= np.uint8(0x5F)).any() or ((lasts - np.uint8(0x21)) >= np.uint8(0x5F)).any():
            return True  # a byte outside 0x21..0x7F: a space, a control or part of a multi-byte character
    return False
