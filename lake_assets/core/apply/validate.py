"""A declaration's rules on parsed rows: string columns in, typed valid rows and refused records out.

Runs inside the engine (the reader's `mapInArrow` function, core/apply/reader.py), vectorised
with pyarrow compute: no per-row Python. A row gets the first reason that applies: the
operation (CDC), then the key columns (empty, malformed, below their minimum), then, for rows
that are not deletes (a delete only needs its key), every other column in declared order.
Values are trimmed (a STRING column declared `trim: false` keeps them as written); an empty
value is NULL (refused as `missing_value` where the column is not nullable). A file of an older contract version lacks the columns later versions added:
they are NULL in its rows.

Clean columns take a fast path: a column whose values have no surrounding whitespace is not
trimmed (a look at each value's first and last byte says so), an integer column of plain
digits (or empty) is cast at once, a date column whose values all cast as `YYYY-MM-DD` is cast at once,
a DECIMAL or DOUBLE column whose values are plain numbers (digits, a sign, a point) and a
TIMESTAMP column whose values carry no zone are cast at once.
Any other column is checked value by value with the same rules, so both paths accept and
refuse exactly the same values.
"""

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_assets.core.declaration import Column, RefusalReason, TableDeclaration

RECORD = "_record"
OPERATION = "_operation"
#: The operations a row's `_operation` holds once validated (a snapshot's rows: `L`; DMS's `I`/`U` as written).
UPSERT, DELETE, TRUNCATE = "U", "D", "T"

INTEGER_PATTERN = r"^[+-]?[0-9]{1,19}$"
DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
TIMESTAMP_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-]00:?00)?$"
#: The TIMESTAMP values of the fast path: no zone.
PLAIN_TIMESTAMP_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?$"
NUMBER_PATTERN = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,3})?$"
DATE_LENGTH = len("YYYY-MM-DD")
BOOLEAN_VALUES = {"true": True, "t": True, "1": True, "y": True, "yes": True,
                  "false": False, "f": False, "0": False, "n": False, "no": False}
#: The spellings of true and of false (plain lists: a module-level `pa.array` imports pandas, 0.26 s
#: for every process that imports the code location).
_TRUE = [k for k, v in BOOLEAN_VALUES.items() if v]
_FALSE = [k for k, v in BOOLEAN_VALUES.items() if not v]


def arrow_type(column: Column) -> pa.DataType:
    """The Arrow type of a declared column's values."""
    if column.type.startswith("DECIMAL("):
        precision, scale = column.type[len("DECIMAL("):-1].split(",")
        return pa.decimal128(int(precision), int(scale))
    return {"INT": pa.int32(), "BIGINT": pa.int64(), "STRING": pa.string(), "DATE": pa.date32(),
            "BOOLEAN": pa.bool_(), "DOUBLE": pa.float64(), "TIMESTAMP": pa.timestamp("us", tz="UTC")}[column.type]


@dataclass(frozen=True)
class Refused:
    """Records of one file that were not applied, with why."""

    records: np.ndarray  # record numbers (int64)
    reasons: list[str]
    details: list[str]

    @staticmethod
    def none() -> "Refused":
        return Refused(np.empty(0, np.int64), [], [])

    def __len__(self) -> int:
        return len(self.reasons)

    def __add__(self, other: "Refused") -> "Refused":
        return Refused(np.concatenate([self.records, other.records]), self.reasons + other.reasons,
                       self.details + other.details)


def validate(declaration: TableDeclaration, rows: pa.Table, operation: str | None,
             delete: str = "D", upserts: tuple[str, ...] = ("I", "U"), operation_column: str | None = None,
             truncate: str | None = None) -> tuple[pa.Table, Refused]:
    """Split `rows` (string columns named as the declaration's, plus RECORD; `op` for CDC) into
    typed valid rows (the newest contract's columns, OPERATION and RECORD) and refusals.

    `operation` is the one operation of every row: a snapshot's, or an insert for CDC rows
    written without theirs (DMS's CdcInsertsOnly); None: the rows carry it in an `op` column,
    one of `upserts` or `delete` (any case). Rows carrying an `op` beside a fixed operation (a
    full load written with DMS's IncludeOpForFullLoad) must say the first of `upserts` (`I`).

    `operation_column` names a declared column holding the operation instead (APPLY AS DELETE
    WHEN ...): its value `delete` deletes, `truncate` truncates the table (such a row needs no
    key: none of its columns is checked), any other value (or none) upserts.
    """
    trimmed = {name: _trimmed(rows[name]) for name in rows.column_names if name != RECORD}
    written = pc.utf8_upper(trimmed["op"]) if "op" in trimmed else None
    allowed: tuple[str, ...] = ()
    if operation_column is not None and operation is not None:
        said = pc.utf8_upper(trimmed[operation_column])
        ops = pc.if_else(pc.equal(said, delete.upper()), DELETE,
                         pc.if_else(pc.equal(said, (truncate or "\0").upper()), TRUNCATE, UPSERT))
        is_delete = pc.equal(ops, DELETE)
        written = None
    elif operation is None:
        if written is None:
            raise ValueError("rows without an `op` column need their operation given")
        ops = written
        is_delete = pc.equal(ops, delete.upper())
        allowed = (*upserts, delete)
    else:
        ops = pa.repeat(operation, rows.num_rows)
        is_delete = pa.repeat(False, rows.num_rows)
        allowed = upserts[:1]
    checks = {c.name: _check(c, trimmed[c.name] if c.trim else rows[c.name])
              for c in declaration.contract.columns if c.name in trimmed}
    reason = pa.nulls(rows.num_rows, pa.string())
    detail = pa.nulls(rows.num_rows, pa.string())
    checked = pc.invert(pc.equal(ops, TRUNCATE))  # a truncate has nothing to check
    for failed, code, column in _rules(declaration, checks, written, is_delete, allowed):
        first = pc.and_(pc.and_(pc.is_null(reason), pc.fill_null(failed, False)), checked)
        if not pc.any(first).as_py():
            continue
        reason = pc.if_else(first, code.value, reason)
        described = (pc.binary_join_element_wise(f"{column}=", trimmed[column], "") if column else
                     pa.repeat(f"operation must be one of {', '.join(dict.fromkeys(allowed))}", rows.num_rows))
        detail = pc.if_else(first, described, detail)

    bad = pc.is_valid(reason)
    any_bad = pc.any(bad).as_py()
    refused = Refused(rows[RECORD].filter(bad).to_numpy(), reason.filter(bad).to_pylist(),
                      detail.filter(bad).to_pylist()) if any_bad else Refused.none()
    good = pc.invert(bad)
    kept = rows.num_rows - len(refused)
    columns = {}
    for declared in declaration.contract.columns:
        if declared.name not in checks:  # a column of a later contract version than the file's
            columns[declared.name] = pa.nulls(kept, arrow_type(declared))
            continue
        values = checks[declared.name].values
        columns[declared.name] = values.filter(good) if any_bad else values
    columns[OPERATION] = ops.filter(good) if any_bad else ops
    columns[RECORD] = rows[RECORD].filter(good) if any_bad else rows[RECORD]
    return pa.table(columns), refused


@dataclass(frozen=True)
class _Checked:
    """A column's typed values (NULL where empty or malformed), and which are malformed (None: none)."""

    values: pa.Array | pa.ChunkedArray
    malformed: pa.Array | pa.ChunkedArray | None
    empty: pa.Array | pa.ChunkedArray
    below: pa.Array | pa.ChunkedArray | None = None  # under the column's minimum


def _rules(declaration: TableDeclaration, checks: dict[str, _Checked], written, is_delete,
           allowed: tuple[str, ...]) -> Iterator[tuple[object, RefusalReason, str | None]]:
    """(failed mask, reason, column) in the order they are checked; `written`: the operations the
    rows carry (None: they carry none), each one of `allowed`."""
    if written is not None:
        yield pc.invert(pc.is_in(written, pa.array(list(allowed)))), RefusalReason.UNKNOWN_OPERATION, None
    for key in declaration.keys:
        check = checks[key]
        yield check.empty, RefusalReason.EMPTY_KEY, key
        if check.malformed is not None:
            yield check.malformed, declaration.column(key).refusal, key
        if check.below is not None:
            yield check.below, declaration.column(key).minimum_reason or RefusalReason.BAD_VALUE, key
    not_delete = pc.invert(is_delete)
    for column in sorted(declaration.contract.columns, key=_rank):
        if column.name in declaration.keys or column.name not in checks:
            continue
        check = checks[column.name]
        if not column.nullable:
            yield pc.and_(not_delete, check.empty), RefusalReason.MISSING_VALUE, column.name
        if check.malformed is not None:
            yield pc.and_(not_delete, check.malformed), column.refusal, column.name
        if check.below is not None:
            yield pc.and_(not_delete, check.below), column.minimum_reason or RefusalReason.BAD_VALUE, column.name


def _rank(column: Column) -> int:
    """The order in which a row's columns are judged (its first failing one names the reason):
    integers, dates, allowed values, booleans, then the rest, each in declared order."""
    if column.allowed:
        return 2
    return {"INT": 0, "BIGINT": 0, "DATE": 1, "BOOLEAN": 3}.get(column.type, 4)


def _check(column: Column, values: pa.ChunkedArray) -> _Checked:
    empty = pc.equal(values, "")
    if column.allowed:
        return _allowed(values, column.allowed, empty)
    kind = column.type.split("(")[0]
    if kind in ("INT", "BIGINT"):
        return _integer(values, arrow_type(column), column.minimum, empty)
    if kind == "DATE":
        return _date(values, empty)
    if kind == "BOOLEAN":
        return _boolean(values, empty)
    if kind == "TIMESTAMP":
        return _timestamp(values, empty)
    if kind in ("DOUBLE", "DECIMAL"):
        return _number(values, arrow_type(column), empty)
    if column.pattern is not None:
        return _matching(values, column.pattern, empty)
    return _Checked(_string_or_null(values), None, empty)


def _matching(values: pa.ChunkedArray, pattern: str, empty) -> _Checked:
    """Well formed: the whole value matches `pattern` (RE2); empty is NULL."""
    malformed = pc.and_(pc.invert(empty), pc.invert(pc.match_substring_regex(values, f"^(?:{pattern})$")))
    return _Checked(_string_or_null(values), malformed if pc.any(malformed).as_py() else None, empty)


def _integer(values: pa.ChunkedArray, kind: pa.DataType, minimum: int | None, empty) -> _Checked:
    """Well formed: an optional sign and digits, within `kind`'s range; empty is NULL."""
    info = np.iinfo(kind.to_pandas_dtype())
    digits = len(str(info.max))
    present = pc.invert(empty)
    plain = pc.or_(pc.ascii_is_decimal(values), empty)  # plain digits, or empty (NULL): no sign, no pattern
    if len(values) and pc.all(plain).as_py() and pc.max(pc.binary_length(values)).as_py() < digits:
        present_values = pc.if_else(empty, pa.scalar(None, pa.string()), values) if pc.any(empty).as_py() else values
        numbers = pc.cast(present_values, pa.int64())  # fewer digits than the type's: in range
        malformed = None
    else:
        shaped = pc.and_(present, pc.match_substring_regex(values, INTEGER_PATTERN))
        wide = pc.cast(pc.if_else(shaped, _without_plus(values), "0"), pa.decimal128(20, 0))
        in_range = pc.and_(pc.greater_equal(wide, pa.scalar(info.min, pa.decimal128(20, 0))),
                           pc.less_equal(wide, pa.scalar(info.max, pa.decimal128(20, 0))))
        well_formed = pc.and_(shaped, in_range)
        numbers = pc.cast(pc.if_else(well_formed, wide, pa.scalar(None, pa.decimal128(20, 0))), pa.int64())
        malformed = pc.and_(present, pc.invert(well_formed))
        malformed = None if not pc.any(malformed).as_py() else malformed
    typed = pc.cast(numbers, kind)
    below = None
    if minimum is not None:
        below = pc.fill_null(pc.less(numbers, minimum), False)
        below = None if not pc.any(below).as_py() else below
    return _Checked(typed, malformed, empty, below)


def _date(values: pa.ChunkedArray, empty) -> _Checked:
    """Well formed: YYYY-MM-DD and a real day (2024-02-30 is not); empty is NULL."""
    if len(values) and pc.min(pc.binary_length(values)).as_py() == DATE_LENGTH \
            and pc.max(pc.binary_length(values)).as_py() == DATE_LENGTH:
        try:
            return _Checked(pc.cast(values, pa.date32()), None, empty)
        except pa.ArrowInvalid:
            pass  # some value is not a date: check them one by one
    shaped = pc.match_substring_regex(values, DATE_PATTERN)
    parsed = pc.strptime(pc.if_else(shaped, values, "1970-01-01"), format="%Y-%m-%d", unit="s", error_is_null=True)
    # strptime rolls 2024-02-30 over to March: only a value that prints back unchanged is a date
    dates = pc.cast(parsed, pa.date32())
    well_formed = pc.fill_null(pc.and_(shaped, pc.equal(pc.cast(dates, pa.string()), values)), False)
    malformed = pc.and_(pc.invert(empty), pc.invert(well_formed))
    return _Checked(pc.if_else(well_formed, dates, pa.scalar(None, pa.date32())),
                    malformed if pc.any(malformed).as_py() else None, empty)


def _timestamp(values: pa.ChunkedArray, empty) -> _Checked:
    """Well formed: `YYYY-MM-DD HH:MM:SS[.ffffff]` (or with T, and Z or +00:00: UTC); empty is NULL."""
    plain = _plain_timestamps(values, empty)
    return plain if plain is not None else _timestamps_by_pattern(values, empty)


def _plain_timestamps(values: pa.ChunkedArray, empty) -> _Checked | None:
    """The fast path of a TIMESTAMP column whose every value is `YYYY-MM-DD HH:MM:SS[.ffffff]`
    (or with T), without a zone: one pattern and Arrow's cast, which refuses a day or a time
    that does not exist (Feb 30, 24:00, :60) as `_timestamps_by_pattern` does. None (a zone, another
    shape, a value the cast refuses): judge value by value."""
    if not pc.all(pc.or_(empty, pc.match_substring_regex(values, PLAIN_TIMESTAMP_PATTERN))).as_py():
        return None
    present = pc.if_else(empty, pa.scalar(None, pa.string()), values) if pc.any(empty).as_py() else values
    try:
        stamps = pc.cast(pc.cast(present, pa.timestamp("us")), pa.timestamp("us", tz="UTC"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return _Checked(stamps, None, empty)


def _timestamps_by_pattern(values: pa.ChunkedArray, empty) -> _Checked:
    """`_timestamp`, value by value: the pattern, then each value parsed and printed back."""
    shaped = pc.match_substring_regex(values, TIMESTAMP_PATTERN)
    plain = pc.if_else(shaped, pc.replace_substring_regex(pc.replace_substring(values, "T", " "),
                                                          r"(Z|[+-]00:?00)$", ""), "1970-01-01 00:00:00")
    seconds = pc.utf8_slice_codeunits(plain, 0, 19)
    parsed = pc.strptime(seconds, format="%Y-%m-%d %H:%M:%S", unit="s", error_is_null=True)
    fraction = pc.utf8_slice_codeunits(plain, 20, 26)  # only a shaped value's: digits, or none
    micros = pc.cast(pc.if_else(pc.equal(fraction, ""), "0",
                                pc.utf8_rpad(fraction, 6, "0")), pa.int64(), safe=False)
    stamps = pc.cast(pc.add(pc.multiply(pc.cast(parsed, pa.int64()), 1_000_000), micros), pa.timestamp("us", tz="UTC"))
    # strptime rolls 24:00 or Feb 30 over: only a value that prints back unchanged is a time (printed
    # from seconds: pyarrow prints a microsecond timestamp's %S with its fraction)
    well_formed = pc.fill_null(pc.and_(shaped, pc.equal(pc.strftime(parsed, "%Y-%m-%d %H:%M:%S"), seconds)), False)
    malformed = pc.and_(pc.invert(empty), pc.invert(well_formed))
    return _Checked(pc.if_else(well_formed, stamps, pa.scalar(None, pa.timestamp("us", tz="UTC"))),
                    malformed if pc.any(malformed).as_py() else None, empty)


def _number(values: pa.ChunkedArray, kind: pa.DataType, empty) -> _Checked:
    """Well formed: a decimal number (DOUBLE: an exponent too); a DECIMAL value must fit its
    precision and scale exactly (no rounding); empty is NULL."""
    plain = _plain_numbers(values, kind, empty)
    return plain if plain is not None else _numbers_by_pattern(values, kind, empty)


def _plain_numbers(values: pa.ChunkedArray, kind: pa.DataType, empty) -> _Checked | None:
    """The fast path of a number column whose every value is a plain number: one cast, no pattern.
    Arrow's string-to-number casts read NUMBER_PATTERN's numbers (a sign, digits, a point: `5.`,
    `.5`, `+1.5`) and more (exponents; `nan` and `inf` for a DOUBLE), and the DECIMAL cast refuses
    a value that would lose a digit or exceed the precision, as `_numbers_by_pattern` does. So when
    no value holds anything but digits, signs and points (a DECIMAL: no exponent), a cast that
    succeeds is that function's result. None (such a value, or a value the cast refuses): judge
    value by value."""
    if pa.types.is_decimal(kind):
        unusual = pc.any(pc.match_substring(values, "e", ignore_case=True)).as_py()
    else:
        unusual = pc.any(pc.match_substring_regex(values, r"[^0-9.+-]")).as_py()
    if unusual:
        return None
    present = pc.if_else(empty, pa.scalar(None, pa.string()), values) if pc.any(empty).as_py() else values
    try:
        typed = pc.cast(present, kind) if pa.types.is_decimal(kind) else pc.cast(pc.cast(present, pa.float64()), kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return _Checked(typed, None, empty)


def _numbers_by_pattern(values: pa.ChunkedArray, kind: pa.DataType, empty) -> _Checked:
    """`_number`, value by value: each value matched against NUMBER_PATTERN (and a DECIMAL's digits counted)."""
    shaped = pc.match_substring_regex(values, NUMBER_PATTERN)
    if pa.types.is_decimal(kind):
        shaped = pc.and_(shaped, pc.invert(pc.match_substring_regex(values, "[eE]")))
        integral = pc.utf8_length(pc.replace_substring_regex(values, r"^[+-]?0*([0-9]*)(\..*)?$", r"\1"))
        fraction = pc.utf8_length(pc.replace_substring_regex(values, r"^[^.]*\.?([0-9]*?)0*$", r"\1"))
        fits = pc.and_(pc.less_equal(integral, kind.precision - kind.scale), pc.less_equal(fraction, kind.scale))
        shaped = pc.and_(shaped, fits)
    source = pc.if_else(shaped, _without_plus(values), "0")
    typed = pc.cast(pc.cast(source, pa.float64()), kind) if not pa.types.is_decimal(kind) else \
        pc.cast(pc.if_else(pc.ends_with(source, "."), pc.binary_join_element_wise(source, "0", ""), source), kind)
    malformed = pc.and_(pc.invert(empty), pc.invert(shaped))
    return _Checked(pc.if_else(shaped, typed, pa.scalar(None, kind)),
                    malformed if pc.any(malformed).as_py() else None, empty)


def _boolean(values: pa.ChunkedArray, empty) -> _Checked:
    """Well formed: empty, or one of BOOLEAN_VALUES' spellings in any case."""
    spelled = pc.utf8_lower(values)
    true = pc.is_in(spelled, pa.array(_TRUE))
    well_formed = pc.or_(pc.or_(true, pc.is_in(spelled, pa.array(_FALSE))), empty)
    booleans = pc.if_else(pc.and_(well_formed, pc.invert(empty)), true, pa.scalar(None, pa.bool_()))
    return _Checked(booleans, None if pc.all(well_formed).as_py() else pc.invert(well_formed), empty)


def _allowed(values: pa.ChunkedArray, allowed: tuple[str, ...], empty) -> _Checked:
    """One of `allowed` in any case, stored as declared; empty is NULL? No: an empty value is not
    allowed unless declared (`""`)."""
    spelled = pa.array(list(allowed))
    exact = pc.is_in(values, spelled)
    if pc.all(exact).as_py():
        return _Checked(values, None, empty)
    lower = pc.utf8_lower(values)
    position = pc.index_in(lower, value_set=pa.array([a.lower() for a in allowed]))
    well_formed = pc.is_valid(position)
    return _Checked(spelled.take(position), pc.invert(well_formed), empty)


def _string_or_null(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """An empty string is NULL: the values' buffers with a validity bitmap that says so (no copy
    of the strings)."""
    if not len(values) or pc.min(pc.binary_length(values)).as_py() > 0:
        return values
    chunks = []
    for chunk in values.chunks:
        present = np.concatenate([np.zeros(chunk.offset, bool),
                                  pc.fill_null(pc.not_equal(chunk, ""), False).to_numpy(zero_copy_only=False)])
        validity = pa.py_buffer(np.packbits(present, bitorder="little"))
        chunks.append(pa.Array.from_buffers(pa.string(), len(chunk), [validity, *chunk.buffers()[1:]],
                                            offset=chunk.offset))
    return pa.chunked_array(chunks, pa.string())


def _without_plus(values):
    """Arrow's string-to-number casts refuse a leading '+', which the patterns allow."""
    if not pc.any(pc.starts_with(values, "+")).as_py():
        return values
    return pc.replace_substring_regex(values, pattern=r"^\+", replacement="")


def _trimmed(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """`values` without surrounding whitespace; not copied when no value has any."""
    return pc.utf8_trim_whitespace(values) if _may_need_trim(values) else values


def _may_need_trim(values: pa.ChunkedArray) -> bool:
    """True if some value may start or end with whitespace (by its first and last byte)."""
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
            return True  # a space, a control or part of a multi-byte character
    return False
