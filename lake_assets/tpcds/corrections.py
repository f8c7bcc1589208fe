"""Apply late corrections (CDC files) to `tpcds.web_sales` with one `MERGE INTO`, in the engine.

Raw: `raw/tpcds/web_sales_cdc/YYYYMMDD-HHMMSSfff.dat`, each line an operation (`I`, `U`,
`D`) then every web_sales column, keyed on (ws_item_sk, ws_order_number). Object keys sort
in delivery order. Everything pending is applied in one run: the last line per key (by
object key, then line) wins and the others count as superseded; then one MERGE (shared
`core.cdc.merge_sql`, the statement the insurance domain uses too). A file sorting at or
before a correction file already applied arrived late: applying it would undo newer
changes, so its rows are quarantined as `late_file` (re-deliver it under a newer name).
Ledger and quarantine rules are the loader's (tpcds/load.py).
"""

import datetime as dt
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from lake_assets.core.cdc import OPERATION, merge_sql
from lake_assets.core.formats import iceberg
from lake_assets.core.ledger import APPLIED, Ledger
from lake_assets.core.raw_zone import RawObject, list_raw, pending
from lake_assets.core.tables import table
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.load import (
    CDC,
    LoadReport,
    counts_per_source,
    ensure_table,
    finish_report,
    ledger_entry,
    quarantine_rejected,
    staged_parse,
    start_report,
)
from lake_assets.tpcds.parse import DETAIL, LINE, REASON, SOURCE, Reason, numbered, parse
from lake_assets.tpcds.schema import COLUMNS, KEYS, RAW, TpcdsTable, qualified

WEB_SALES = qualified(TpcdsTable.WEB_SALES)


def pending_corrections(storage: LakeStorage, ledger: Ledger, reapply: bool = False) -> list[RawObject]:
    """New correction objects (with `reapply`, also those `lake restore` reverted)."""
    return pending(list_raw(storage, RAW.corrections), ledger.settled(WEB_SALES, reapply))


def latest_applied(ledger: Ledger) -> str | None:
    """The newest correction object applied so far and not reverted since (late files sort at or before it)."""
    applied = [key for (key, _), e in ledger.latest(WEB_SALES).items()
               if e["status"] == APPLIED and key.startswith(RAW.corrections)]
    return max(applied, default=None)


def apply_corrections(storage: LakeStorage, spark: SparkSession, run_id: str, reapply: bool = False) -> LoadReport:
    """Apply the pending correction objects (with `reapply`, also those `lake restore` reverted)."""
    started = time.perf_counter()
    ensure_table(storage, TpcdsTable.WEB_SALES)
    report = start_report(storage, WEB_SALES)
    ledger = Ledger(storage)
    objects = pending_corrections(storage, ledger, reapply)
    if not objects:
        return finish_report(storage, report, started)
    latest = latest_applied(ledger)
    late = [o.key for o in objects if latest is not None and o.key <= latest]

    lines = None
    for obj in objects:
        one = spark.read.text(storage.uri(obj.key)).withColumn(SOURCE, F.lit(obj.key))
        lines = one if lines is None else lines.unionByName(one)
    keys = KEYS[TpcdsTable.WEB_SALES]
    parsed = parse(numbered(lines), COLUMNS[TpcdsTable.WEB_SALES], keys, with_operation=True)
    if late:
        is_late = F.col(SOURCE).isin(late)
        parsed = (parsed.withColumn(REASON, F.when(is_late, F.lit(Reason.LATE_FILE.value)).otherwise(F.col(REASON)))
                  .withColumn(DETAIL, F.when(is_late, F.lit(f"arrived after {latest} was applied; re-deliver it "
                                                            "under a newer name")).otherwise(F.col(DETAIL))))

    columns = [c for c, _ in COLUMNS[TpcdsTable.WEB_SALES]]
    with staged_parse(storage, spark, parsed, run_id) as staged:
        at = dt.datetime.now(dt.timezone.utc)
        quarantine_rejected(storage, staged, {o.key: o for o in objects}, run_id, at)
        order = Window.partitionBy(*keys).orderBy(F.col(SOURCE).desc(), F.col(LINE).desc())
        winners = (staged.where(F.col(REASON).isNull())
                   .withColumn("_rank", F.row_number().over(order)).where("_rank = 1")
                   .select(SOURCE, OPERATION, *columns))
        view = "lake_tpcds_corrections"
        winners.createOrReplaceTempView(view)
        if winners.limit(1).count():
            spark.sql(merge_sql(WEB_SALES, view, keys, columns)).collect()
        counts = counts_per_source(staged)
        applied = {r[SOURCE]: int(r["n"]) for r in winners.groupBy(SOURCE).agg(F.count(F.lit(1)).alias("n")).collect()}
    snapshot = iceberg.current_snapshot_id(iceberg.open_table(storage, table(WEB_SALES)))
    report.files = []
    for obj in objects:
        lines_in, valid, _ = counts.get(obj.key, (0, 0, 0))
        report.files.append(ledger_entry(WEB_SALES, obj, CDC, (lines_in, valid, valid - applied.get(obj.key, 0)),
                                   snapshot, run_id, at))
    ledger.record(report.files)
    return finish_report(storage, report, started)
