"""Benchmark: CDC batches of 1k, 10k, 100k and 1M rows into a 10M-row `insurance` table,
through the real Dagster asset and as a bare-engine MERGE on a copy, in the same run.

    uv run python benchmarks/cdc_batches.py [--rows 10000000] [--batches 1000,10000,100000,1000000] [--quick]

One process (Sail is embedded, so peak RSS covers the engine) and one embedded S3 server
(SeaweedFS, its own temporary LAKE_HOME). The table is loaded once: ours through the
`apply_insurance` job (full load CSV in `raw/fullload/`), the baseline by the bare engine
(CSV → Delta). Then each batch, in order, is a DMS-style CDC file (70 % U, 25 % I of new
keys above the table's, 5 % D): ours puts it in `raw/cdcload/` and runs the job
(`execute_in_process`, with its asset checks; the asset's own `duration_seconds` is the
figure, the job's wall time is in the note), the baseline runs one plain
`MERGE INTO ... ON t.policy_id = s.policy_id` of the same CSV into its copy, after all of
ours. Peak RSS is sampled per phase (the whole process, engine included; memory the engine
keeps from an earlier phase counts too, which is why the baselines' MERGEs, 12-15 GiB, run
once all of ours are done).

Which keys a batch updates decides what a narrow commit can save, so it is said in each
figure: `recent` batches update and delete keys among the newest `HOT_FRACTION` of the
table (at least 4x the batch: renewals and endorsements of recent policies, the common
case), `uniform` ones anywhere in the key range. A uniform 1,000-row batch touches nearly
every file of a clustered table, so it is measured too (`--uniform`, on by default), last.
At the end the two tables must hold the same rows (count, sum of insured values, distinct
keys) and every commit's inserted/updated/deleted must equal the generated counts.
`--quick` runs 200,000 rows and batches of 1k and 10k (a smoke run under a minute or so).

The data generator lives in `policy_data.py` (shared with `full_load.py`); `csv_bytes`
and `cdc_batch` here.
"""

import argparse
import io
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from figures import Figure, render
from phases import restore_phases, time_phases
from policy_data import FIRST_KEY, RssSampler, policies, run_apply_job, seed_columns  # re-exported for other benchmarks
from private_lake import private_lake

BATCHES = (1_000, 10_000, 100_000, 1_000_000)
HOT_FRACTION = 0.01
#: batch rows -> (target, whether (seconds, baseline seconds, peak GiB) meet it)
TARGETS = {
    1_000: ("<= 1.5 s and <= 0.05x baseline", lambda s, b, gib: s <= 1.5 and s <= 0.05 * b),
    1_000_000: ("<= 8 s, <= 4 GiB", lambda s, b, gib: s <= 8 and gib <= 4),
}


def csv_bytes(table: pa.Table, header: bool) -> bytes:
    sink = io.BytesIO()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=header, quoting_style="none"))
    return sink.getvalue()


@dataclass
class Keys:
    """The keys the table holds while batches are applied (both tables see the same batches)."""

    alive: np.ndarray  # bool per key - FIRST_KEY
    next_key: int

    @classmethod
    def loaded(cls, rows: int) -> "Keys":
        return cls(np.ones(rows, bool), FIRST_KEY + rows)


def cdc_batch(rng: np.random.Generator, keys: Keys, rows: int, spread: str) -> dict:
    """A CDC batch of `rows` rows (70 % U, 25 % I, 5 % D, interleaved as DMS writes them);
    U and D hit live keys, among the newest HOT_FRACTION (`recent`) or anywhere (`uniform`)."""
    n_update, n_insert = int(rows * 0.70), int(rows * 0.25)
    n_delete = rows - n_update - n_insert
    live = np.flatnonzero(keys.alive) + FIRST_KEY
    if spread == "recent":
        window = max(int(len(live) * HOT_FRACTION), 4 * (n_update + n_delete))
        live = live[-window:]
    touched = rng.choice(live, n_update + n_delete, replace=False)
    inserted = np.arange(keys.next_key, keys.next_key + n_insert, dtype=np.int64)
    keys.alive[touched[n_update:] - FIRST_KEY] = False
    keys.alive = np.concatenate([keys.alive, np.ones(n_insert, bool)])
    keys.next_key += n_insert
    batch_keys = np.concatenate([touched[:n_update], inserted, touched[n_update:]])
    ops = np.array(["U"] * n_update + ["I"] * n_insert + ["D"] * n_delete)
    order = rng.permutation(len(batch_keys))
    table = policies(rng, batch_keys[order])
    table = table.add_column(0, "op", pa.array(ops[order]))
    return {"csv": csv_bytes(table.select(["op", *(name for name, _ in seed_columns())]), header=False),
            "updates": n_update, "inserts": n_insert, "deletes": n_delete}


def measure(rows: int = 10_000_000, batches: tuple[int, ...] = BATCHES, quick: bool = False,
            uniform: bool = True) -> list[Figure]:
    """CDC batches into a `rows`-row table: ours (the asset) vs a bare-engine MERGE, same run."""
    if quick:
        rows, batches = 200_000, tuple(b for b in batches if b <= 10_000) or (1_000,)
    warnings.filterwarnings("ignore", module="dagster")
    warnings.filterwarnings("ignore", category=UserWarning)
    with private_lake("lake-cdc-batches-") as (home, server):
        return _measure(rows, batches, uniform, home, server.endpoint)


def _size(rows: int) -> str:
    return f"{rows / 1e6:g}M" if rows >= 1_000_000 else f"{rows / 1e3:g}k"


def _measure(rows: int, batches: tuple[int, ...], uniform: bool, home: Path, endpoint: str) -> list[Figure]:
    from lake_assets.core.formats.delta import open_table, row_count
    from lake_assets.core.tables import table as lake_table
    from lake_assets.definitions import build_definitions
    from lake_assets.resources.engine import SparkEngine
    from lake_assets.resources.storage import LakeStorage
    from lake_assets.settings import LakeSettings
    INSURANCE = lake_table("insurance")

    settings = LakeSettings.from_env()
    storage = LakeStorage.from_settings(settings).with_endpoint(endpoint)
    storage.ensure_bucket()
    spark = SparkEngine.from_settings(settings).session(storage)
    spark.sql("SELECT 1").collect()  # the engine's start is not what we measure
    base = LakeStorage(bucket="baseline", home=str(home)).with_endpoint(endpoint)
    base.ensure_bucket()
    base_table = base.uri("base/policies")
    definitions = build_definitions(settings)

    started = time.perf_counter()
    rng = np.random.default_rng(42)
    full = csv_bytes(policies(rng, np.arange(FIRST_KEY, FIRST_KEY + rows, dtype=np.int64)), header=True)
    print(f"generated {rows:,} policies ({len(full) / 1e6:.0f} MB CSV) in {time.perf_counter() - started:.1f} s",
          flush=True)
    base.put_bytes("base/full.csv", full)
    bare_load = _bare_load(spark, base.uri("base/full.csv"), base_table)
    storage.put_bytes("raw/fullload/policies_full.csv", full)
    del full
    load = _run_job(definitions)
    print(f"loaded {rows:,} rows: ours {load['asset_s']:.2f} s in the asset ({load['wall_s']:.2f} s job, "
          f"{load['gib']:.2f} GiB), bare engine {bare_load:.2f} s", flush=True)
    delta = open_table(storage, INSURANCE)
    print(f"  the table: {len(delta.file_uris())} files", flush=True)

    keys = Keys.loaded(rows)
    plan = [(b, "recent") for b in batches] + ([(1_000, "uniform")] if uniform else [])
    runs, problems = [], []
    for index, (batch_rows, spread) in enumerate(plan, start=1):
        batch = cdc_batch(rng, keys, batch_rows, spread)
        storage.put_bytes(f"raw/cdcload/20260101-{index:06d}000.csv", batch["csv"])
        base.put_bytes(f"base/cdc-{index}.csv", batch["csv"])
        phases = time_phases()
        ours = _run_job(definitions)
        restore_phases()
        breakdown = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in phases.items() if seconds >= 0.005)
        delta = open_table(storage, INSURANCE)
        history = delta.history(limit=1)[0].get("operationMetrics", {}) or {}
        expected = (batch["inserts"], batch["updates"], batch["deletes"])
        if (ours["inserted"], ours["updated"], ours["deleted"]) != expected:
            problems.append(f"{batch_rows:,} {spread}: I/U/D {ours['inserted']}/{ours['updated']}/{ours['deleted']}, "
                            f"expected {expected}")
        commit = (f"{ours['strategy']}: {history.get('numRemovedFiles', '?')} files replaced by "
                  f"{history.get('numAddedFiles', '?')}, {len(delta.file_uris())} files after")
        runs.append((batch_rows, spread, ours, commit, breakdown))
        print(f"CDC {batch_rows:,} rows into {_size(rows)} ({spread} keys): ours {ours['asset_s']:.2f} s "
              f"({commit}), {ours['gib']:.2f} GiB; {breakdown}", flush=True)
    # the bare MERGEs after all of ours: the engine keeps memory it used (the bare MERGE's
    # 12-15 GiB), which would otherwise count in the next batch's peak
    figures = []
    for index, (batch_rows, spread, ours, commit, breakdown) in enumerate(runs, start=1):
        bare = _bare_merge(spark, base.uri(f"base/cdc-{index}.csv"), base_table)
        target, meets = TARGETS.get(batch_rows, ("", None)) if spread == "recent" else ("", None)
        met = meets(ours["asset_s"], bare["seconds"], ours["gib"]) if meets else None
        figures.append(Figure(
            f"CDC {batch_rows:,} rows into {_size(rows)} ({spread} keys)", ours["asset_s"], bare["seconds"],
            "bare-engine MERGE", ours["gib"], target, met,
            f"job wall {ours['wall_s']:.2f} s; {commit}; baseline peak {bare['gib']:.2f} GiB; {breakdown}",
            rows=batch_rows if spread == "recent" else None))
        print(f"{figures[-1].work}: bare MERGE {bare['seconds']:.2f} s, {bare['gib']:.2f} GiB", flush=True)

    ours_rows = row_count(open_table(storage, INSURANCE))
    fingerprint = "SELECT count(*) AS n, sum(insured_value) AS v, count(DISTINCT policy_id) AS k FROM delta.`{}`"
    mine = spark.sql(fingerprint.format(INSURANCE.uri(storage))).collect()[0].asDict()
    theirs = spark.sql(fingerprint.format(base_table)).collect()[0].asDict()
    if mine != theirs or ours_rows != int(keys.alive.sum()):
        problems.append(f"tables differ: ours {mine} ({ours_rows:,} rows in the log), baseline {theirs}, "
                        f"expected {int(keys.alive.sum()):,} rows")
    if problems:
        raise SystemExit("CORRECTNESS FAILED:\n  " + "\n  ".join(problems))
    print(f"correct: both tables hold the same {mine['n']:,} rows; every commit's I/U/D equals the batch", flush=True)
    return figures


def _bare_load(spark, source: str, table: str) -> float:  # SparkSession
    from pyspark.sql.types import DateType, IntegerType, StringType, StructField, StructType

    spark_types = {"INT": IntegerType(), "DATE": DateType(), "STRING": StringType()}
    schema = StructType([StructField(name, spark_types[sql]) for name, sql in seed_columns()])
    started = time.perf_counter()
    spark.read.csv(source, schema=schema, header=True).write.format("delta").mode("overwrite").save(table)
    return time.perf_counter() - started


def _bare_merge(spark, source: str, table: str) -> dict:  # SparkSession
    from pyspark.sql.types import DateType, IntegerType, StringType, StructField, StructType

    spark_types = {"INT": IntegerType(), "DATE": DateType(), "STRING": StringType()}
    schema = StructType([StructField("op", StringType())] +
                        [StructField(name, spark_types[sql]) for name, sql in seed_columns()])
    sets = ", ".join(f"t.{c} = s.{c}" for c, _ in seed_columns() if c != "policy_id")
    with RssSampler() as rss:
        started = time.perf_counter()
        spark.read.csv(source, schema=schema, header=False).createOrReplaceTempView("bench_cdc")
        spark.sql(f"""
            MERGE INTO delta.`{table}` AS t USING bench_cdc AS s ON t.policy_id = s.policy_id
            WHEN MATCHED AND s.op = 'D' THEN DELETE
            WHEN MATCHED THEN UPDATE SET {sets}
            WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT ({', '.join(c for c, _ in seed_columns())})
                 VALUES ({', '.join('s.' + c for c, _ in seed_columns())})
        """).collect()
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "gib": rss.peak_gib}


def _run_job(definitions) -> dict:  # dg.Definitions
    metadata, wall, gib = run_apply_job(definitions)
    commits = metadata["commits"].value
    return {"asset_s": float(metadata["duration_seconds"].value), "wall_s": wall, "gib": gib,
            "inserted": int(metadata["rows_inserted"].value), "updated": int(metadata["rows_updated"].value),
            "deleted": int(metadata["rows_deleted"].value),
            "strategy": ",".join(c.get("strategy", "?") for c in commits) or "no commit"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--batches", default=",".join(str(b) for b in BATCHES))
    parser.add_argument("--no-uniform", action="store_true", help="skip the uniform-keys 1,000-row batch")
    parser.add_argument("--quick", action="store_true", help="200,000 rows, batches up to 10k")
    args = parser.parse_args()
    figures = measure(args.rows, tuple(int(b) for b in args.batches.split(",")), args.quick, not args.no_uniform)
    print()
    print(f"machine: {os.cpu_count()} cores")
    print(render(figures))


if __name__ == "__main__":
    main()
