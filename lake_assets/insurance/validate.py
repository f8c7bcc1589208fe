"""Contract rules on parsed rows: string columns in, typed valid rows and rejected records out.

Vectorised with pyarrow compute, so a ten-million-row file is checked in well under a
second. A row gets the first reason that applies, in the order of `_rules`. Delete rows
only need a valid key: the other fields of a delete are not applied. A file of an older
contract version lacks the columns later versions added: they are NULL in its rows.
"""

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


def validate(rows: pa.Table, operation: str | None) -> tuple[pa.Table, Rejected]:
    """Split `rows` into typed valid rows (with `_operation` and RECORD) and rejections.

    `operation` is the fixed operation of a full load; None means the rows carry an `op`
    column (CDC).
    """
    trimmed = {name: pc.utf8_trim_whitespace(rows[name]) for name in rows.column_names if name != RECORD}
    ops = pc.utf8_upper(trimmed["op"]) if operation is None else pa.repeat(operation, rows.num_rows)
    is_delete = pc.equal(ops, "D")

    # Each value is checked once; the masks are reused to cast the valid rows.
    checked = {column: _is_int32(trimmed[column]) for column in _integer_columns(trimmed)}
    checked["expiry_date"] = _is_date(trimmed["expiry_date"])
    reason = pa.nulls(rows.num_rows, pa.string())
    detail = pa.nulls(rows.num_rows, pa.string())
    for failed, code, column in _rules(trimmed, checked, ops, is_delete, check_op=operation is None):
        first = pc.and_(pc.is_null(reason), pc.fill_null(failed, False))
        if not pc.any(first).as_py():  # a clean column: nothing to record
            continue
        reason = pc.if_else(first, code.value, reason)
        if column:
            described = pc.binary_join_element_wise(f"{column}=", trimmed[column], "")
        else:
            described = pa.repeat(f"operation must be one of {', '.join(OPERATIONS)}", rows.num_rows)
        detail = pc.if_else(first, described, detail)

    bad = pc.is_valid(reason)
    rejected = Rejected(
        rows[RECORD].filter(bad).to_numpy(),
        reason.filter(bad).to_pylist(),
        detail.filter(bad).to_pylist(),
    )
    good = pc.invert(bad)
    kept = rows.num_rows - len(rejected)
    typed = {c.name: _typed(trimmed[c.name], c.arrow_type, checked.get(c.name)).filter(good)
             if c.name in trimmed else pa.nulls(kept, c.arrow_type)  # a column of a later version
             for c in current().columns}
    for flag in FLAG_COLUMNS:
        typed[flag] = pc.utf8_upper(typed[flag])
    typed["_operation"] = ops.filter(good)
    typed[RECORD] = rows[RECORD].filter(good)
    return pa.table(typed), rejected


def _rules(values: dict[str, pa.Array], checked: dict[str, pa.Array], ops: pa.Array, is_delete: pa.Array,
           check_op: bool):
    """(failed-mask, reason, column) in the order they are checked; `checked` holds each
    integer and date column's "is well-formed" mask."""
    if check_op:
        yield pc.invert(pc.is_in(ops, pa.array(OPERATIONS))), Reason.UNKNOWN_OPERATION, None
    yield pc.equal(values[KEY], ""), Reason.EMPTY_KEY, KEY
    yield pc.invert(checked[KEY]), Reason.BAD_INTEGER, KEY
    yield pc.match_substring_regex(values[KEY], NEGATIVE_PATTERN), Reason.NEGATIVE_KEY, KEY
    not_delete = pc.invert(is_delete)
    for column in _integer_columns(values):
        if column != KEY:
            present = pc.not_equal(values[column], "")
            yield pc.and_(not_delete, pc.and_(present, pc.invert(checked[column]))), Reason.BAD_INTEGER, column
    date = values["expiry_date"]
    yield pc.and_(not_delete, pc.and_(pc.not_equal(date, ""), pc.invert(checked["expiry_date"]))), Reason.BAD_DATE, "expiry_date"
    for column in FLAG_COLUMNS:
        flag = pc.utf8_upper(values[column])
        yield pc.and_(not_delete, pc.invert(pc.is_in(flag, pa.array(["Y", "N"])))), Reason.BAD_FLAG, column
    for column in (c.name for c in current().columns if pa.types.is_boolean(c.arrow_type) and c.name in values):
        spelled = pc.utf8_lower(values[column])
        known = pc.or_(pc.equal(spelled, ""), pc.is_in(spelled, pa.array(list(BOOLEAN_VALUES))))
        yield pc.and_(not_delete, pc.invert(known)), Reason.BAD_BOOLEAN, column


def _integer_columns(values: dict[str, pa.Array]) -> list[str]:
    """The contract's integer columns the file carries (an older version's file lacks later ones)."""
    return [c.name for c in current().columns if pa.types.is_integer(c.arrow_type) and c.name in values]


def _is_int32(values: pa.Array) -> pa.Array:
    shaped = pc.match_substring_regex(values, INTEGER_PATTERN)
    numbers = pc.cast(pc.if_else(shaped, _without_plus(values), "0"), pa.int64())
    in_range = pc.and_(pc.greater_equal(numbers, INT32_MIN), pc.less_equal(numbers, INT32_MAX))
    return pc.and_(shaped, in_range)


def _is_date(values: pa.Array) -> pa.Array:
    shaped = pc.match_substring_regex(values, DATE_PATTERN)
    parsed = pc.strptime(pc.if_else(shaped, values, "1970-01-01"), format="%Y-%m-%d", unit="s", error_is_null=True)
    # strptime rolls 2024-02-30 over to March: only a value that prints back unchanged is a date.
    # (Casting to date32 and back to string prints %Y-%m-%d like strftime, twenty times faster.)
    round_trip = pc.equal(pc.cast(pc.cast(parsed, pa.date32()), pa.string()), values)
    return pc.fill_null(pc.and_(shaped, round_trip), False)


def _typed(values: pa.Array, arrow_type: pa.DataType, well_formed: pa.Array | None) -> pa.Array:
    """Cast strings of rows that passed validation; an empty string is NULL.

    Rows that failed are filtered out afterwards, so values that are not `well_formed`
    (their column's check mask; an empty string is never well formed) are blanked first to
    keep the casts total.
    """
    if pa.types.is_string(arrow_type):
        return pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)
    if pa.types.is_boolean(arrow_type):  # unknown spellings were rejected; empty is NULL
        spelled = pc.utf8_lower(values)
        return pc.if_else(pc.is_in(spelled, pa.array([k for k, v in BOOLEAN_VALUES.items() if v])), True,
                          pc.if_else(pc.equal(spelled, ""), pa.scalar(None, pa.bool_()), False))
    safe = pc.if_else(well_formed, values, pa.scalar(None, pa.string()))
    if pa.types.is_date32(arrow_type):
        return pc.cast(pc.strptime(safe, format="%Y-%m-%d", unit="s", error_is_null=True), pa.date32())
    return pc.cast(_without_plus(safe), arrow_type)


def _without_plus(values: pa.Array) -> pa.Array:
    """Arrow's string-to-int cast refuses a leading '+', which INTEGER_PATTERN allows."""
    return pc.replace_substring_regex(values, pattern=r"^\+", replacement="")
