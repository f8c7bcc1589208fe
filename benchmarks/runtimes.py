"""One benchmark, three runtimes: the same insurance and TPC-DS work on Sail local, Sail
local-cluster and JVM Spark, side by side in one run.

```bash
uv run python benchmarks/runtimes.py [--policies 100000] [--cdc 10000] [--scale 0.01] [--jvm-jars DIR]
```

One embedded S3 server (`private_lake.py`); each runtime gets its own lake on it (a bucket
and an Iceberg table bucket) and the same raw input, applied by `lake run` in a process of
its own, as a user runs it (so each figure includes that process's engine start):

1. insurance full load: `--policies` generated policies (`policy_data.py`);
2. insurance CDC: one batch of `--cdc` changes into it (70 % U, 25 % I, 5 % D; `cdc_batches.py`);
3. the TPC-DS star at `--scale` (`lake tpcds generate`'s generator; not timed), loaded with
   its checks and reports.

Runtimes: Sail `local` (the default), Sail `local-cluster` (a driver and 2 workers), and a
local JVM Spark 3.5.7 (`LAKE_ENGINE=local`, the `jvm` extra's Iceberg and S3A jars). Delta's
jars are on no registry, so the JVM runs the insurance steps only when `--jvm-jars` names a
directory holding them (README: "Running on a JVM Spark"); otherwise it runs TPC-DS alone.
Each figure is the `lake run`'s wall time; the ratio is against Sail local. After the run
every runtime's TPC-DS star must hold Sail local's row counts (pyiceberg), and the insurance
table its row count (delta-rs).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cdc_batches import Keys, cdc_batch
from policy_data import full_load_csv
from private_lake import private_lake

LAKE = str(Path(sys.executable).with_name("lake"))
CLUSTER = {"SAIL_MODE": "local-cluster", "SAIL_CLUSTER__WORKER_INITIAL_COUNT": "2"}
STEPS = ("insurance full load", "insurance CDC", "TPC-DS star (load, checks, reports)")


@dataclass
class Runtime:
    name: str
    env: dict[str, str]
    insurance: bool = True  # False: no Delta on this runtime
    seconds: dict[str, float] = field(default_factory=dict)


def _lake_env(home: Path, bucket: str, warehouse: str, extra: dict[str, str]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SAIL_", "LAKE_", "AWS_"))}
    env.update(LAKE_HOME=str(home), LAKE_S3_PORT=os.environ["LAKE_S3_PORT"], LAKE_S3_BUCKET=bucket,
               LAKE_ICEBERG_WAREHOUSE=warehouse, **extra)
    return env


def _timed_run(env: dict[str, str]) -> float:
    started = time.perf_counter()
    run = subprocess.run([LAKE, "run"], env=env, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"lake run failed ({run.returncode}):\n{run.stdout}\n{run.stderr[-3000:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", type=int, default=100_000)
    parser.add_argument("--cdc", type=int, default=10_000)
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument("--jvm-jars", default="", help="a directory with Delta's jars: the JVM runs insurance too")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")

    from deltalake import DeltaTable

    from lake_assets.core.tables import TABLES, Domain, TableFormat
    from lake_assets.core.tables import table as lake_table
    from lake_assets.resources.storage import LakeStorage
    from lake_assets.tpcds.generate import generate
    INSURANCE = lake_table("insurance")

    with private_lake("lake-runtimes-") as (home, server), tempfile.TemporaryDirectory() as no_delta:
        jvm_jars = args.jvm_jars or no_delta
        runtimes = [Runtime("Sail local", {"SAIL_MODE": "local"}),
                    Runtime("Sail local-cluster", CLUSTER),
                    Runtime("JVM Spark", {"LAKE_ENGINE": "local", "LAKE_SPARK_JARS": jvm_jars},
                            insurance=bool(args.jvm_jars))]
        full = full_load_csv(args.policies)
        batch = cdc_batch(np.random.default_rng(7), Keys.loaded(args.policies), args.cdc, "recent")["csv"]
        counts: dict[str, dict[str, int]] = {}
        for runtime in runtimes:
            suffix = uuid.uuid4().hex[:6]
            storage = LakeStorage(bucket=f"rt-{suffix}", home=str(home), warehouse=f"wh-rt-{suffix}")
            storage = storage.with_endpoint(server.endpoint)
            storage.ensure_bucket()
            env = _lake_env(home, storage.bucket, storage.warehouse, runtime.env)
            if runtime.insurance:
                storage.put_bytes("raw/fullload/policies_full.csv", full)
                runtime.seconds[STEPS[0]] = _timed_run(env)
                storage.put_bytes("raw/cdcload/20260101-000001000.csv", batch)
                runtime.seconds[STEPS[1]] = _timed_run(env)
            generate(storage, args.scale)
            runtime.seconds[STEPS[2]] = _timed_run(env)
            print(f"{runtime.name}: " + ", ".join(f"{k} {v:.1f} s" for k, v in runtime.seconds.items()), flush=True)
            client = storage.catalog().pyiceberg()
            counts[runtime.name] = {name: len(client.load_table(table.identifier).scan().to_arrow())
                                    for name, table in TABLES.items()
                                    if table.domain is Domain.TPCDS and table.format is TableFormat.ICEBERG}
            if runtime.insurance:
                counts[runtime.name][INSURANCE.name] = DeltaTable(
                    INSURANCE.uri(storage), storage_options=storage.delta_storage_options()).count()

    reference = runtimes[0]
    for runtime in runtimes[1:]:
        differ = {name: (n, counts[reference.name].get(name)) for name, n in counts[runtime.name].items()
                  if n != counts[reference.name].get(name)}
        if differ:
            raise SystemExit(f"{runtime.name}'s tables differ from {reference.name}'s (rows, reference): {differ}")
    print(f"\n`lake run` wall seconds ({os.cpu_count()} cores; {args.policies:,} policies, a {args.cdc:,}-change "
          f"CDC batch, TPC-DS SF {args.scale:g}); ratio to {reference.name}; every table's rows equal\n")
    print("| work | " + " | ".join(r.name for r in runtimes) + " |")
    print("|---|" + "---|" * len(runtimes))
    for step in STEPS:
        base = reference.seconds.get(step)
        cells = []
        for runtime in runtimes:
            spent = runtime.seconds.get(step)
            cells.append("n/a (no Delta jar)" if spent is None else
                         f"{spent:.1f}" + ("" if runtime is reference or not base else f" ({spent / base:.2f}x)"))
        print(f"| {step} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
