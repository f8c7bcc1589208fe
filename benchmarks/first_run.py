"""The first `lake run` on a fresh lake against DuckDB reading the same raw objects into Parquet.

    uv run python benchmarks/first_run.py --scale 1

Not a test: prints figures and the ratio (target: at most 3x). A temporary LAKE_HOME with its
embedded S3 server; TPC-DS landed at the given scale and the insurance samples (`data/`)
landed as `lake demo` lands them. Measured, in that order and on the same objects:

- `lake run` in its own process, as a user types it: both domains, Dagster run creation,
  the loads, every check and the TPC-DS reports; wall, and CPU of that process tree plus
  the S3 server;
- DuckDB reading the same raw objects (the TPC-DS star through `tpcds/raw_duckdb.py`, the
  insurance CSV files) from the same S3 server into local Parquet.
"""

import argparse
import os
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from private_lake import private_lake  # noqa: E402

TARGET_RATIO = 3.0


def _cpu(server_pid: int) -> float:
    """CPU seconds of this process, its waited-for children and the S3 server."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(f"/proc/{server_pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    server = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    with private_lake("lake-first-run-") as (home, server):
        _measure(args.scale, home, server)


def _measure(scale: float, home: Path, server) -> None:  # EmbeddedS3
    from lake_assets.cli.raw import ZONES, zone_prefix
    from lake_assets.core.tables import ICEBERG_CATALOG
    from lake_assets.resources.duckdb_reader import add_s3_secret, connect, quote
    from lake_assets.resources.storage import LakeStorage
    from lake_assets.settings import LakeSettings
    from lake_assets.tpcds import raw_contract as contract
    from lake_assets.tpcds.generate import generate
    from lake_assets.tpcds.raw_duckdb import create_raw_views

    storage = LakeStorage.from_settings(LakeSettings.from_env()).with_endpoint(server.endpoint)
    storage.ensure_bucket()
    generated = generate(storage, scale)
    prefixes = {zone: zone_prefix(zone)[1] for zone in ZONES}
    for zone, prefix in prefixes.items():
        for file in sorted((REPO / "data" / zone).glob("*.csv")):
            storage.put_bytes(prefix + file.name, file.read_bytes())
    print(f"SF{scale:g} landed: {generated.rows}, insurance samples", flush=True)

    cpu, started = _cpu(server.pid), time.perf_counter()
    done = subprocess.run([str(Path(sys.executable).parent / "lake"), "run"], cwd=REPO, env=os.environ.copy(),
                          capture_output=True, text=True)
    ours_wall, ours_cpu = time.perf_counter() - started, _cpu(server.pid) - cpu
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        raise SystemExit(f"lake run exited {done.returncode}")

    out = home / "parquet"
    out.mkdir()
    cpu, started = _cpu(server.pid), time.perf_counter()
    duck = connect(":memory:")
    create_raw_views(duck, storage, "raw")
    for table in contract.STAR_TABLES:
        duck.execute(f"COPY {ICEBERG_CATALOG}.raw.{table} TO '{out / table}.parquet' (FORMAT parquet)")
    add_s3_secret(duck, storage)
    for zone, prefix in prefixes.items():
        duck.execute(f"COPY (SELECT * FROM read_csv({quote(storage.uri(prefix) + '*.csv')}, all_varchar = true)) "
                     f"TO '{out / zone}.parquet' (FORMAT parquet)")
    duck_wall, duck_cpu = time.perf_counter() - started, _cpu(server.pid) - cpu

    print(f"\n| first run on a fresh lake (SF{scale:g} + insurance samples, {os.cpu_count()} cores) | wall s | CPU s |"
          f"\n|---|---|---|\n| `lake run` (both domains, run creation, loads, checks, reports) | {ours_wall:.2f} | "
          f"{ours_cpu:.2f} |\n| DuckDB: the same raw objects from the same S3 into Parquet | {duck_wall:.2f} | "
          f"{duck_cpu:.2f} |")
    print(f"\n`lake run` / DuckDB: wall {ours_wall / duck_wall:.2f}x, CPU {ours_cpu / duck_cpu:.2f}x "
          f"(target {TARGET_RATIO:g}x)")


if __name__ == "__main__":
    main()
