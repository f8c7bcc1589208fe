"""Parse raw TPC-DS lines IN THE ENGINE: split, cast with try_cast rules, and say what is wrong.

Input: a DataFrame of raw lines (`value`) with the object each came from (`_source`) and,
when the caller needs it (quarantine, ranking several lines of one key), its 1-based line
number (`_line`, `numbered`). Output: the same rows with every column typed, plus
`_reason` (NULL for a valid row, else a `Reason`), `_detail` and `_raw`. Nothing is
filtered out here: the caller writes valid rows to the table and the rest to quarantine,
so every raw line is accounted for.

Rules (the raw-zone contract: `|` separated, no header, no quoting, NULL = empty field):
- the field count must equal the table's column count (+1 for a CDC operation);
- a non-empty field must cast (`try_cast`) to its column type: a bad number, decimal out
  of range or impossible date is `bad_value`, naming every such column in `_detail`;
- the key columns must be present (`missing_key`);
- CDC lines must start with `I`, `U` or `D` (`unknown_operation`); for `D` only the key
  columns are checked.
Only Spark SQL expressions are used, so Sail and JVM Spark run the same code.
"""

from collections.abc import Sequence
from enum import StrEnum

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from lake_assets.core.cdc import OPERATION


class Reason(StrEnum):
    """Why a raw TPC-DS line was quarantined."""

    WRONG_FIELD_COUNT = "wrong_field_count"
    BAD_VALUE = "bad_value"
    MISSING_KEY = "missing_key"
    WRONG_PARTITION = "wrong_partition"  # a fact row whose sold date is not its object's day
    UNKNOWN_OPERATION = "unknown_operation"


SOURCE, LINE, REASON, DETAIL, RAW_TEXT = "_source", "_line", "_reason", "_detail", "_raw"
_FIELDS = "_fields"


def numbered(lines: DataFrame) -> DataFrame:
    """Add `_line`, each line's 1-based number within its `_source`.

    `spark.read.text` keeps the lines of an object in order and
    `monotonically_increasing_id` grows along them, so ordering by it within a source
    numbers the lines as they are in the object. It must be taken right after the read.
    """
    with_id = lines.withColumn("_read_order", F.monotonically_increasing_id())
    order = Window.partitionBy(SOURCE).orderBy("_read_order")
    return with_id.withColumn(LINE, F.row_number().over(order).cast("bigint")).drop("_read_order")


def parse(lines: DataFrame, columns: Sequence[tuple[str, str]], keys: Sequence[str],
          with_operation: bool = False, extra: list[tuple[Column, Column]] | None = None) -> DataFrame:
    """Typed columns and `_reason`/`_detail` for every line (see the module docstring).

    `extra` adds (failure condition, detail) pairs checked after the built-in rules, each
    reported as `Reason.WRONG_PARTITION`.
    """
    offset = 1 if with_operation else 0
    expected = len(columns) + offset
    position = [LINE] if LINE in lines.columns else []
    split = lines.select(SOURCE, *position, F.col("value").alias(RAW_TEXT),
                         F.split(F.col("value"), r"\|", -1).alias(_FIELDS), *_passthrough(lines))
    texts = {name: F.expr(f"nullif(get({_FIELDS}, {i + offset}), '')") for i, (name, _) in enumerate(columns)}
    typed = [
        (texts[name] if sql_type == "STRING"
         else F.expr(f"try_cast(nullif(get({_FIELDS}, {i + offset}), '') AS {sql_type})")).alias(name)
        for i, (name, sql_type) in enumerate(columns)
    ]
    operation = [F.expr(f"get({_FIELDS}, 0)").alias(OPERATION)] if with_operation else []
    frame = split.select("*", *typed, *operation)

    field_count_ok = F.size(_FIELDS) == expected
    is_delete = F.col(OPERATION) == "D" if with_operation else F.lit(False)
    bad = {name: texts[name].isNotNull() & F.col(name).isNull() for name, sql_type in columns if sql_type != "STRING"}
    bad_key = F.lit(False)
    for name in keys:
        if name in bad:
            bad_key = bad_key | bad[name]
    bad_any = F.lit(False)
    for condition in bad.values():
        bad_any = bad_any | condition
    bad_detail = F.concat_ws("; ", *[
        F.when(condition, F.concat(F.lit(f"{name}="), texts[name], F.lit(f" is not {sql_type}")))
        for name, sql_type in columns if name in bad for condition in [bad[name]]
    ])
    missing = [F.col(k).isNull() for k in keys]
    missing_key = missing[0]
    for condition in missing[1:]:
        missing_key = missing_key | condition

    reason = F.when(~field_count_ok, F.lit(Reason.WRONG_FIELD_COUNT.value))
    detail = F.when(~field_count_ok, F.concat(F.lit(f"expected {expected} fields, found "),
                                              F.size(_FIELDS).cast("string")))
    if with_operation:
        unknown = F.col(OPERATION).isNull() | ~F.col(OPERATION).isin("I", "U", "D")
        reason = reason.when(unknown, F.lit(Reason.UNKNOWN_OPERATION.value))
        detail = detail.when(unknown, F.concat(F.lit("operation must be I, U or D, not "),
                                               F.coalesce(F.col(OPERATION), F.lit("''"))))
    reason = reason.when(F.when(is_delete, bad_key).otherwise(bad_any), F.lit(Reason.BAD_VALUE.value))
    detail = detail.when(F.when(is_delete, bad_key).otherwise(bad_any), bad_detail)
    reason = reason.when(missing_key, F.lit(Reason.MISSING_KEY.value))
    detail = detail.when(missing_key, F.lit(f"key {', '.join(keys)} must be present"))
    for condition, text in extra or []:
        reason = reason.when(condition, F.lit(Reason.WRONG_PARTITION.value))
        detail = detail.when(condition, text)
    return frame.withColumn(REASON, reason).withColumn(DETAIL, detail).drop(_FIELDS)


def valid_rows(parsed: DataFrame) -> DataFrame:
    """The valid rows of a parse (`_reason` NULL), each field cast once.

    A plain filter on `_reason` is pushed below the casts by the engine's optimizer (Sail's
    DataFusion rewrites it into the reason's expression), which then splits and casts every
    line twice, once to filter and once to output. A volatile guard that is always true keeps
    the filter above the casts (optimizers do not push a filter through a volatile column).
    """
    guarded = F.when(F.rand() >= 0, F.col(REASON))
    return parsed.withColumn(REASON, guarded).where(F.col(REASON).isNull())


def plain_line(columns: Sequence[tuple[str, str]], keys: Sequence[str]) -> str | None:
    """A regular expression matched only by lines that `parse` finds valid and that a CSV reader
    (`|`, the columns' types) types exactly as `parse` does: the right number of fields, each
    empty or a plain number that casts (BIGINT: at most 18 digits; DECIMAL(p,s): at most p-s
    digits, then at most s decimals), the keys present. None when a column is neither type.

    It is a sufficient test, not the rule: a line it refuses may still be valid (`+5`, a
    DATE), and is parsed. Character classes, not escapes: the pattern reads the same to
    every engine's regex dialect and SQL string rules.
    """
    fields = []
    for name, sql_type in columns:
        if sql_type == "BIGINT":
            number = "-?[0-9]{1,18}"
        elif sql_type.startswith("DECIMAL("):
            precision, scale = (int(n) for n in sql_type[len("DECIMAL("):-1].split(","))
            if precision <= scale:
                return None
            number = f"-?[0-9]{{1,{precision - scale}}}" + (f"([.][0-9]{{1,{scale}}})?" if scale else "")
        else:
            return None
        fields.append(f"({number})" if name in keys else f"({number})?")
    return "^" + "[|]".join(fields) + "$"


def _passthrough(lines: DataFrame) -> list[str]:
    """Columns of `lines` besides the raw line and its position (e.g. a partition folder)."""
    return [c for c in lines.columns if c not in ("value", SOURCE, LINE)]
