"""Benchmark: where a run of the change core spends its time, step by step.

    uv run --group bench python benchmarks/core_steps.py [--rows N] [--partition-by COLUMN] [--iceberg]

On a private lake (temporary LAKE_HOME, its embedded S3 server and Sail), `apply_pending` of
the `insurance` declaration applies a full load of N rows (default 1M), then a 1,000-row CDC
file whose keys are spread over the table. Each step of the core (`STEPS`) is timed by wrapping
its function; the script prints each run's wall time and the steps that took more than 50 ms.
The whole run is the baseline the steps add up to (the rest is planning, the ledger and S3
listing). `engine_side.py` measures the same work as a user runs it (`lake run`, checks included).

With `--partition-by state_code`, the same two runs follow on a copy of the declaration
partitioned by that column (`partition_by`), and the ratios to the unpartitioned runs are printed.
With `--iceberg`, they follow on a copy declared `format: iceberg` (in the catalog as
`bench.insurance_iceberg`), with the ratios to the Delta table's runs.
"""

import argparse
import functools
import importlib
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from policy_data import FIRST_KEY, full_load_csv  # noqa: E402
from private_lake import private_lake, storage_and_engine  # noqa: E402

#: (module, function) of each step timed: the stages the core writes, the commit, the derived tables.
STEPS = [("lake_assets.core.apply.stage", "Stage.write"), ("lake_assets.core.apply.commit", "commit"),
         ("lake_assets.core.apply.feed", "write_version"), ("lake_assets.core.apply.feed", "catch_up"),
         ("lake_assets.core.apply.history", "record"), ("lake_assets.core.apply.history", "start_over"),
         ("lake_assets.core.apply.bookkeeping", "record_tombstones"),
         ("lake_assets.core.apply.bookkeeping", "quarantine"), ("lake_assets.core.apply.run", "_guard"),
         ("lake_assets.core.apply.plan", "plan"), ("lake_assets.core.ledger", "Ledger.record"),
         ("lake_assets.core.apply.curated_iceberg", "IcebergCurated.commit")]
CDC_ROWS = 1_000


def _timed(spent: dict[str, float], label: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            # a stage is named by what it holds (its first argument after self: parsed, resolved)
            name = f"{label}({args[1]})" if label == "Stage.write" else label
            spent[name] += time.perf_counter() - started
    return timed


def wrap_steps(spent: dict[str, float]) -> None:
    """Time every step of STEPS, also where run.py and history.py imported it by name."""
    users = [importlib.import_module(m) for m in ("lake_assets.core.apply.run", "lake_assets.core.apply.history")]
    for module, path in STEPS:
        owner: Any = importlib.import_module(module)
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        original = getattr(owner, name)
        timed = _timed(spent, path, original)
        setattr(owner, name, timed)
        for user in users:
            if not parents and getattr(user, name, None) is original:
                setattr(user, name, timed)


def cdc_batch(rows: int) -> bytes:
    """CDC_ROWS updates (DMS's layout, no header) of keys spread evenly over the table."""
    keys = list(range(FIRST_KEY, FIRST_KEY + rows, max(1, rows // CDC_ROWS)))[:CDC_ROWS]
    return "".join(f"U,{k},2026-01-31,Urban,CA,West,{k % 997},Retail,N,Y\n" for k in keys).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partition-by", help="also run a copy of the table partitioned by this column")
    parser.add_argument("--iceberg", action="store_true", help="also run a copy of the table kept as Iceberg")
    args = parser.parse_args()
    rows = args.rows
    with private_lake("core-steps-") as (_home, server):
        from lake_assets.core.apply.run import apply_pending
        from lake_assets.core.declaration import load_declaration
        from lake_assets.core.registry import declaration

        storage, spark = storage_and_engine(server.endpoint)
        spent: dict[str, float] = defaultdict(float)
        wrap_steps(spent)
        tables = [declaration("insurance")]
        declared = tables[0].model_dump(mode="json")

        def copy(name: str, folder: str, **changed: Any):
            return load_declaration({**declared, "name": name, **changed, "sources": [
                {**s, "prefix": f"raw/{folder}/{s['prefix'].removeprefix('raw/')}"} for s in declared["sources"]]},
                name)
        if args.partition_by:
            tables.append(copy("insurance_partitioned", "partitioned", partition_by=[args.partition_by]))
        if args.iceberg:
            tables.append(copy("insurance_iceberg", "iceberg", format="iceberg", group="bench"))
        times: list[list[float]] = []
        for table in tables:
            print(f"{table.name} ({table.format.value}, partition_by: {list(table.partition_by) or 'none'})")
            times.append([])
            snapshot, changes = (next(s.prefix for s in table.sources if s.kind == kind) for kind in ("snapshot", "cdc"))
            storage.put_bytes(f"{snapshot}LOAD00000001.csv", full_load_csv(rows))
            for label, raw in ((f"full load of {rows:,} rows", None), (f"{CDC_ROWS:,} CDC rows into {rows:,}", True)):
                if raw:
                    storage.put_bytes(f"{changes}20260101-000000000.csv", cdc_batch(rows))
                spent.clear()
                started = time.perf_counter()
                report = apply_pending(table, storage, spark, f"core-steps-{table.name}-{len(label)}")
                times[-1].append(time.perf_counter() - started)
                print(f"  {label}: {times[-1][-1]:.2f} s (rows after: {report.rows_after:,})")
                for step, seconds in sorted(spent.items(), key=lambda item: -item[1]):
                    if seconds > 0.05:
                        print(f"    {step:40s} {seconds:6.2f} s")
        for table, spent_times in zip(tables[1:], times[1:]):
            print(f"{table.name} / insurance: full load {spent_times[0] / times[0][0]:.2f}x, "
                  f"CDC batch {spent_times[1] / times[0][1]:.2f}x")


if __name__ == "__main__":
    main()
