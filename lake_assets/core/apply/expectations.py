"""A declared table's expectations, judged on the engine over the rows a run reads (DLT's
`expect`, `expect_or_drop`, `expect_or_fail`).

Each expectation is a Spark SQL condition over the declared columns; a row fails it when the
condition is not true (false or NULL). Per expectation, the run counts the failing rows:
`warn` keeps them, `drop` quarantines them (reason `expectation`, the detail naming it, the raw
text the row's values as JSON), `fail` fails the run before anything is written (its objects stay
pending: fix the source, or the declaration, and run again). The counts reach the table's
metadata and one asset check per expectation.
"""

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lake_assets.core.apply.reader import DETAIL, FILE_INDEX, KIND, RAW_TEXT, REASON, RowKind
from lake_assets.core.apply.validate import RECORD
from lake_assets.core.declaration import Action, RefusalReason, TableDeclaration
from lake_assets.core.errors import LakeError


class ExpectationFailed(LakeError):
    """An `expect_or_fail` expectation failed: the run applied nothing."""


@dataclass(frozen=True)
class Judged:
    """What a run's rows made of the table's expectations."""

    failed: dict[str, int]  # failing rows per expectation
    dropped: DataFrame | None  # (`_file`, `_record`, refusal columns) of the rows a `drop` expectation refused
    dropped_per_file: dict[int, int]


def judge(declaration: TableDeclaration, parsed: DataFrame) -> Judged:
    """Count each expectation's failing rows among `parsed` (the reader's output); raise
    ExpectationFailed when a `fail` one has any."""
    expectations = declaration.expectations
    rows = parsed.where(F.col(KIND) == RowKind.ROW.value)
    fails = [~F.coalesce(F.expr(e.condition), F.lit(False)) for e in expectations]
    counts = rows.agg(*[F.sum(f.cast("int")).alias(f"_x{i}") for i, f in enumerate(fails)]).collect()[0]
    failed = {e.name: int(counts[f"_x{i}"] or 0) for i, e in enumerate(expectations)}
    for expectation in expectations:
        if expectation.action is Action.FAIL and failed[expectation.name]:
            raise ExpectationFailed(
                f"{declaration.name}: expectation {expectation.name} ({expectation.condition}) failed on "
                f"{failed[expectation.name]} row(s); nothing was applied (the objects stay pending)")
    drops = [(e, f) for e, f in zip(expectations, fails) if e.action is Action.DROP and failed[e.name]]
    if not drops:
        return Judged(failed, None, {})
    # the first failing one names the reason: one flat CASE (a CASE nested per expectation is a
    # plan message as deep as their number, which Spark Connect's protobuf refuses past ~45)
    why = None
    for expectation, fail in drops:
        reason = F.lit(f"{expectation.name}: {expectation.condition}")
        why = F.when(fail, reason) if why is None else why.when(fail, reason)
    assert why is not None  # drops is not empty
    columns = [c for c in declaration.contract.names]
    dropped = rows.where(why.isNotNull()).select(
        "*", F.lit(RefusalReason.EXPECTATION.value).alias(f"{REASON}_x"), why.alias(f"{DETAIL}_x"),
        F.to_json(F.struct(*columns)).alias(f"{RAW_TEXT}_x"))
    dropped = dropped.drop(REASON, DETAIL, RAW_TEXT).withColumnsRenamed(
        {f"{REASON}_x": REASON, f"{DETAIL}_x": DETAIL, f"{RAW_TEXT}_x": RAW_TEXT})
    per_file = {int(r[FILE_INDEX]): int(r["n"])
                for r in dropped.groupBy(FILE_INDEX).agg(F.count(F.lit(1)).alias("n")).collect()}
    return Judged(failed, dropped, per_file)


def kept(rows: DataFrame, judged: Judged) -> DataFrame:
    """`rows` without those a `drop` expectation refused."""
    if judged.dropped is None:
        return rows
    return rows.join(judged.dropped.select(FILE_INDEX, RECORD), [FILE_INDEX, RECORD], "left_anti")
