"""Benchmark: the TPC-DS objects through the declared change core against the star's own loader.

    uv run --group bench python benchmarks/tpcds_on_core.py [--scale 1] [--format delta|iceberg] [--history]

What moving the TPC-DS tables onto the core (issues 29 and 30) would cost, measured on the same
objects: on a private lake (temporary LAKE_HOME, its embedded S3 server and Sail), `lake tpcds
generate`'s code lands the star's raw objects at `--scale`; the star's loader
(`tpcds/load.py`) loads each dimension's snapshot and every web_sales day object, as `lake run`
does (the baseline, in the same run; the dimensions' baseline is the change core itself since
the star's dimensions moved onto it: the two columns are the same code, in two namespaces).
Then each table's own declaration file
(`lake_assets/tables/tpcds/<table>.yaml`, in a namespace of the run's; `|`, `.dat`, no header,
`trim: false` on text; no SCD2 history, which the star does not keep, unless `--history`), and
`apply_pending` of the change core applies each, reading the star's raw objects where the generator lands them: each dimension's export as a file of upserts ordered
by arrival (`kind: cdc, sequence_from: arrival`, no operation field: the star's upsert, keys
the export no longer holds kept); web_sales from its day objects
(`raw/tpcds/web_sales/ws_sold_date_sk=<key>/`, the Hive layout of the core's partition
snapshots: `partition: ws_sold_date_sk`), the table partitioned as the star's is
(`partition_by: ["truncate(365, ws_sold_date_sk)"]`: six partitions, not one per day; on
Delta, which has no transforms, not partitioned).
Then both paths load BACKFILL_DAYS days again (the star's `lake backfill`; the core: each day's
object delivered again as a new object of its partition; then those objects loaded again as of
their own stamps, the core's `lake backfill`), then a batch of CORRECTIONS late
corrections (`lake tpcds corrections`: one CDC object, which the core reads where it lands, as
the web_sales declaration's CDC source). Prints each step's seconds on both paths,
the ratio, and the core's steps that took longest (core_steps.py's timers).
"""

import argparse
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from core_steps import wrap_steps  # noqa: E402
from private_lake import private_lake, storage_and_engine  # noqa: E402


#: Days the backfill step loads again (every 61st day of the calendar: spread over the table).
BACKFILL_DAYS = 30
#: web_sales lines the corrections batch changes (cancelled orders, changed prices, late lines).
CORRECTIONS = 10_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--format", choices=("delta", "iceberg"), default="iceberg",
                        help="the declared tables' format (the star is Iceberg)")
    parser.add_argument("--history", action="store_true",
                        help="declare an SCD2 history too (the star keeps none; the core keeps one by default)")
    args = parser.parse_args()
    with private_lake("tpcds-on-core-") as (_home, server):
        from lake_assets.core.apply.run import apply_pending
        from lake_assets.tpcds.correction_batch import land_corrections
        from lake_assets.tpcds.corrections import apply_corrections
        from lake_assets.tpcds.generate import generate
        from lake_assets.tpcds.layout import fact_layout
        from lake_assets.tpcds.raw_contract import fact_key
        from lake_assets.tpcds.load import load_dimension, load_fact_days
        from lake_assets.tpcds.schema import DIMENSIONS, TpcdsTable, engine_name
        from lake_assets_tests.helpers.tpcds import star_declaration

        storage, spark = storage_and_engine(server.endpoint)
        generated = generate(storage, args.scale)
        print(f"TPC-DS scale {args.scale:g}: {generated.objects} objects, {generated.bytes / 2**20:,.0f} MiB; rows "
              + ", ".join(f"{t} {n:,}" for t, n in generated.rows.items()))

        star: dict[str, float] = {}
        for table in DIMENSIONS:
            started = time.perf_counter()
            load_dimension(storage, spark, table, f"star-{table}")
            star[table] = time.perf_counter() - started
        layout = fact_layout(storage)
        started = time.perf_counter()
        load_fact_days(storage, spark, list(layout.objects), "star-web_sales", layout)
        star[TpcdsTable.WEB_SALES] = time.perf_counter() - started

        spent: dict[str, float] = defaultdict(float)
        wrap_steps(spent)
        core: dict[str, float] = {}
        group = f"bench_{uuid.uuid4().hex[:4]}"
        print(f"{'table':12s} {'star loader':>12s} {'core (' + args.format + ')':>16s} {'ratio':>7s}  "
              "the core's longest steps")
        for table in [*DIMENSIONS, TpcdsTable.WEB_SALES]:  # each reads the star's objects where they landed
            declared = star_declaration(table, group, args.format, args.history)
            spent.clear()
            started = time.perf_counter()
            report = apply_pending(declared, storage, spark, f"core-{table}")
            core[table] = time.perf_counter() - started
            print(f"{table:12s} {star[table]:10.2f} s {core[table]:14.2f} s {core[table] / star[table]:6.2f}x  "
                  f"{longest(spent)} ({report.rows_after:,} rows)")
        print(f"{'the star':12s} {sum(star.values()):10.2f} s {sum(core.values()):14.2f} s "
              f"{sum(core.values()) / sum(star.values()):6.2f}x")

        days = sorted(d for d in layout.objects if d is not None)[::61][:BACKFILL_DAYS]
        started = time.perf_counter()
        load_fact_days(storage, spark, days, "star-backfill", layout)
        star_backfill = time.perf_counter() - started
        fact = star_declaration(TpcdsTable.WEB_SALES, group, args.format, args.history)
        for day in days:  # a second object in the day's folder (the star, which allows one, has loaded its days)
            storage.put_bytes(fact_key(day, 1), storage.get_bytes(layout.objects[day].key)[0])
        spent.clear()
        started = time.perf_counter()
        report = apply_pending(fact, storage, spark, "core-backfill")
        core_backfill = time.perf_counter() - started
        print(f"{len(days)} days again: star {star_backfill:.2f} s, core {core_backfill:.2f} s "
              f"({core_backfill / star_backfill:.2f}x; {longest(spent)}; {report.total('updated'):,} rows rewritten)")
        # the same days loaded again as the star's backfill does it: the objects applied, as of their stamps
        spent.clear()
        started = time.perf_counter()
        report = apply_pending(fact, storage, spark, "core-reload", reload=[fact_key(day, 1) for day in days])
        core_reload = time.perf_counter() - started
        print(f"{len(days)} days loaded again (`lake backfill`): star {star_backfill:.2f} s, core {core_reload:.2f} s "
              f"({core_reload / star_backfill:.2f}x; {longest(spent)}; {len(report.files)} objects)")

        # a batch of late corrections (`lake tpcds corrections`): one CDC object, the operation first
        land_corrections(storage, CORRECTIONS)  # where the core's web_sales reads its CDC objects too
        started = time.perf_counter()
        apply_corrections(storage, spark, "star-corrections")
        star_corrections = time.perf_counter() - started
        spent.clear()
        started = time.perf_counter()
        report = apply_pending(fact, storage, spark, "core-corrections")
        core_corrections = time.perf_counter() - started
        star_rows = spark.table(engine_name(TpcdsTable.WEB_SALES)).count()
        print(f"{CORRECTIONS:,} corrections: star {star_corrections:.2f} s, core {core_corrections:.2f} s "
              f"({core_corrections / star_corrections:.2f}x; {longest(spent)}); web_sales rows after: star "
              f"{star_rows:,}, core {report.rows_after:,}")


def longest(spent: dict[str, float]) -> str:
    """The core's three longest steps of the last apply."""
    return ", ".join(f"{step} {seconds:.2f} s" for step, seconds in sorted(spent.items(), key=lambda i: -i[1])[:3])


if __name__ == "__main__":
    main()
