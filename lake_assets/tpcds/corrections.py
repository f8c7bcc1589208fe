"""Apply corrections (CDC files) to `tpcds.web_sales` in one commit, in the engine.

Raw: `raw/tpcds/web_sales_cdc/YYYYMMDD-HHMMSSfff.dat`, each line an operation (`I`, `U`,
`D`) then every web_sales column, keyed on (ws_item_sk, ws_order_number). Each line is a
change with a sequence (tpcds/sequencing.py): its file's DMS time from its name, or, for a
file whose name holds none (`fix.dat`), the file's arrival (after everything applied so
far; the ledger's detail says so); then its line. Everything pending is applied in one run
by the rule day loads follow too (tpcds/apply.py): per key, the newest change wins if it
is at least as new as the key's row and tombstone; the others are superseded (counted in
the ledger). So a file older than changes already applied still applies to the keys they
did not touch, and no name blocks a later file. A delete leaves a tombstone, so re-loading
a day cannot bring the key back. Ledger and quarantine rules are the loader's (tpcds/load.py).
"""

import datetime as dt
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lake_assets.core.cdc import OPERATION
from lake_assets.core.formats import iceberg
from lake_assets.core.frames import union_all
from lake_assets.core.ledger import Ledger
from lake_assets.core.raw_zone import RawObject, list_raw, pending
from lake_assets.core.tables import table
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.apply import apply_changes
from lake_assets.tpcds.load import (
    CDC,
    TABLE_COLUMNS,
    LoadReport,
    counts_per_source,
    ensure_table,
    finish_report,
    ledger_entry,
    quarantine_rejected,
    staged_parse,
    start_report,
)
from lake_assets.tpcds.parse import LINE, REASON, SOURCE, numbered, parse
from lake_assets.tpcds.schema import COLUMNS, KEYS, RAW, SEQUENCE, TpcdsTable, ledger_name
from lake_assets.tpcds.sequencing import object_sequences, with_sequences

WEB_SALES = ledger_name(TpcdsTable.WEB_SALES)
#: The ledger's detail of a correction stamped as of its arrival (`lake status` shows it).
BY_ARRIVAL = ("sequenced by arrival: its name holds no DMS time (YYYYMMDD-HHMMSSfff), so its changes count as "
              "newer than everything applied before it")


def pending_corrections(storage: LakeStorage, ledger: Ledger, reapply: bool = False) -> list[RawObject]:
    """New correction objects (with `reapply`, also those `lake restore` reverted)."""
    return pending(list_raw(storage, RAW.corrections), ledger.settled(WEB_SALES, reapply))


def apply_corrections(storage: LakeStorage, spark: SparkSession, run_id: str, reapply: bool = False) -> LoadReport:
    """Apply the pending correction objects (with `reapply`, also those `lake restore` reverted)."""
    started = time.perf_counter()
    ensure_table(storage, TpcdsTable.WEB_SALES)
    report = start_report(storage, WEB_SALES)
    ledger = Ledger(storage)
    objects = pending_corrections(storage, ledger, reapply)
    if not objects:
        return finish_report(storage, report, started)
    sequences = object_sequences(ledger.entries(WEB_SALES).to_pylist(), objects, named=True)

    lines = union_all([spark.read.text(storage.uri(obj.key)).withColumn(SOURCE, F.lit(obj.key)) for obj in objects])
    keys = KEYS[TpcdsTable.WEB_SALES]
    parsed = parse(numbered(lines), COLUMNS[TpcdsTable.WEB_SALES], keys, with_operation=True)
    parsed = with_sequences(parsed, {o.key: sequences[o.key].prefix for o in objects}, SOURCE, LINE, SEQUENCE)

    with staged_parse(storage, spark, parsed, run_id) as staged:
        at = dt.datetime.now(dt.timezone.utc)
        by_key = {o.key: o for o in objects}
        quarantine_rejected(storage, staged, by_key, run_id, at)
        changes = staged.where(F.col(REASON).isNull()).select(SOURCE, OPERATION, *TABLE_COLUMNS)
        applied = apply_changes(storage, spark, changes, by_key, {}, report.rows_before == 0,
                                lambda frame: staged_parse(storage, spark, frame, run_id), at, reread=True)
        counts = counts_per_source(staged)
    snapshot = iceberg.current_snapshot_id(iceberg.open_table(storage, table(WEB_SALES)))
    report.files = []
    for obj in objects:
        lines_in, valid, _ = counts.get(obj.key, (0, 0, 0))
        sequence = sequences[obj.key]
        report.files.append(ledger_entry(WEB_SALES, obj, CDC, (lines_in, valid, valid - applied.get(obj.key, 0)),
                                         snapshot, run_id, at, sequence.base, BY_ARRIVAL if sequence.by_arrival else None))
    ledger.record(report.files)
    return finish_report(storage, report, started)
