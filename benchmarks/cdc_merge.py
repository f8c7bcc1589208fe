"""Benchmark: full load and CDC MERGE of the policy table, through the real Dagster assets
and against a bare-engine baseline, on the embedded S3 server and the embedded Sail engine.

    uv run python benchmarks/cdc_merge.py [--rows 1000000] [--change-fraction 0.1]

Everything runs in this process (Sail is embedded), so peak RSS covers the engine too.
The S3 server (SeaweedFS) is a separate process with its own temporary LAKE_HOME.
"""

import argparse
import warnings
import io
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lake_assets.insurance.contract import CDC_COLUMN_NAMES, DATA_COLUMN_NAMES, DATA_COLUMNS  # noqa: E402
from lake_assets.resources.embedded_s3 import embedded_s3, free_port  # noqa: E402
from lake_assets.settings import embedded_credentials  # noqa: E402

FIRST_KEY = 100_000
STATES = {  # state -> (region, cities)
    "NY": ("East", ["New York", "Buffalo", "Albany", "Rochester"]),
    "NJ": ("East", ["Newark", "Trenton", "Jersey City"]),
    "MA": ("East", ["Boston", "Worcester", "Springfield"]),
    "FL": ("South", ["Miami", "Tampa", "Orlando", "Jacksonville"]),
    "TX": ("South", ["Houston", "Dallas", "Austin", "San Antonio"]),
    "GA": ("South", ["Atlanta", "Savannah"]),
    "IL": ("Central", ["Chicago", "Springfield", "Peoria"]),
    "OH": ("Central", ["Columbus", "Cleveland", "Cincinnati"]),
    "CA": ("West", ["Los Angeles", "San Francisco", "San Diego", "Sacramento"]),
    "WA": ("West", ["Seattle", "Spokane", "Tacoma"]),
}
BUSINESS_TYPES = ["Retail", "Apparel", "Manufacturing", "Office Bldg", "Farming", "Construction",
                  "Hospitality", "Education", "Healthcare", "Transportation"]


# --- memory ------------------------------------------------------------------------------

def peak_rss_gib() -> float:
    """Peak RSS of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20)


class RssSampler:
    """Highest current RSS seen while a phase runs (ru_maxrss only ever grows)."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval, self.peak, self._stop = interval, 0, threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")

    def _rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self._page

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            time.sleep(self.interval)

    def __enter__(self) -> "RssSampler":
        self.peak = self._rss()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())

    @property
    def peak_gib(self) -> float:
        return self.peak / (1 << 30)


# --- data ----------------------------------------------------------------------------------

def _dict_column(rng: np.random.Generator, values: list[str], n: int) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, len(values), n, dtype=np.int32)),
                                          pa.array(values)).cast(pa.string())


def policies(rng: np.random.Generator, keys: np.ndarray) -> dict[str, pa.Array]:
    n = len(keys)
    codes = list(STATES)
    state_index = rng.integers(0, len(codes), n)
    # a city code within the state's cities: flatten (state, city) pairs into one dictionary
    pairs = [(s, c) for s in codes for c in STATES[s][1]]
    offsets = np.cumsum([0] + [len(STATES[s][1]) for s in codes])[:-1]
    counts = np.array([len(STATES[s][1]) for s in codes])
    pair_index = offsets[state_index] + (rng.integers(0, 1 << 30, n) % counts[state_index])
    start = np.datetime64("2025-01-01")
    expiry = (start + rng.integers(0, 3 * 365, n).astype("timedelta64[D]")).astype("datetime64[D]")
    return {
        "policy_id": pa.array(keys.astype(np.int32)),
        "expiry_date": pa.array(expiry).cast(pa.string()),
        "location_name": pa.array([c for _, c in pairs]).take(pa.array(pair_index)),
        "state_code": pa.array(codes).take(pa.array(state_index)),
        "region_name": pa.array([STATES[s][0] for s in codes]).take(pa.array(state_index)),
        "insured_value": pa.array(rng.integers(10_000, 5_000_000, n, dtype=np.int32)),
        "business_type": _dict_column(rng, BUSINESS_TYPES, n),
        "earthquake_coverage": _dict_column(rng, ["Y", "N"], n),
        "flood_coverage": _dict_column(rng, ["Y", "N"], n),
    }


def csv_bytes(table: pa.Table, header: bool) -> bytes:
    sink = io.BytesIO()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=header, quoting_style="none"))
    return sink.getvalue()


def generate(rows: int, change_fraction: float, seed: int = 42) -> dict:
    rng = np.random.default_rng(seed)
    keys = np.arange(FIRST_KEY, FIRST_KEY + rows, dtype=np.int64)
    full = pa.table(policies(rng, keys))
    changes = int(rows * change_fraction)
    n_update, n_insert = int(changes * 0.70), int(changes * 0.25)
    n_delete = changes - n_update - n_insert
    touched = rng.choice(keys, n_update + n_delete, replace=False)  # uniform over the key range
    updated, deleted = touched[:n_update], touched[n_update:]
    inserted = np.arange(keys[-1] + 1, keys[-1] + 1 + n_insert, dtype=np.int64)
    cdc_keys = np.concatenate([updated, inserted, deleted])
    ops = np.array(["U"] * n_update + ["I"] * n_insert + ["D"] * n_delete)
    order = rng.permutation(len(cdc_keys))  # operations interleaved, as DMS writes them
    cdc_keys, ops = cdc_keys[order], ops[order]
    columns = policies(rng, cdc_keys)
    cdc = pa.table({"op": pa.array(ops), **columns})
    return {
        "full_csv": csv_bytes(full.select(DATA_COLUMN_NAMES), header=True),
        "cdc_csv": csv_bytes(cdc.select(CDC_COLUMN_NAMES), header=False),
        "rows": rows, "updates": n_update, "inserts": n_insert, "deletes": n_delete,
        "expected_rows": rows + n_insert - n_delete,
    }


# --- where the time goes (--profile) ---------------------------------------------------------

PHASES: dict[str, list[float]] = {}


def profile_pipeline() -> None:
    """Wrap the pipeline's steps with timers; nested steps are counted in both."""
    import functools

    from lake_assets.core.formats import delta as delta_module
    from lake_assets.insurance import merge, pipeline
    from lake_assets.resources.storage import LakeStorage

    def timed(owner, name: str, label: str) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                PHASES.setdefault(label, []).append(time.perf_counter() - started)
        setattr(owner, name, wrapper)

    for name in ("parse_csv", "validate", "resolve", "_current_sequences", "_with_audit", "_quarantine", "_commit",
                 "open_table", "row_count", "pending_objects", "_record_tombstones", "_read_batch", "_publish", "_guard"):
        if hasattr(pipeline, name):
            timed(pipeline, name, name)
    for name in ("stage", "create_from", "merge_changes", "rewrite_changes"):
        if hasattr(merge, name):
            timed(merge, name, f"merge.{name}")
    timed(LakeStorage, "get_bytes", "s3 get_bytes")
    timed(LakeStorage, "put_bytes", "s3 put_bytes")
    timed(LakeStorage, "delete_prefix", "s3 delete_prefix")
    for name in ("record",):
        timed(pipeline.Ledger, name, f"ledger.{name}")
    del delta_module


def print_profile(label: str) -> None:
    if not PHASES:
        return
    print(f"  {label}: " + ", ".join(f"{k} {sum(v):.2f}s" + (f"×{len(v)}" if len(v) > 1 else "")
                                     for k, v in PHASES.items()), flush=True)
    PHASES.clear()


# --- through the assets -----------------------------------------------------------------

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def run_job(definitions, label: str) -> dict:
    import dagster as dg

    job = definitions.resolve_job_def("apply_insurance")
    with RssSampler() as rss:
        started = time.perf_counter()
        result = job.execute_in_process(run_config=QUIET, instance=dg.DagsterInstance.ephemeral(),
                                      raise_on_error=True)
        wall = time.perf_counter() - started
    if not result.success:
        raise SystemExit(f"{label}: the apply_insurance job failed")
    metadata = next(e.materialization.metadata for e in result.get_asset_materialization_events()
                    if e.materialization.asset_key.to_user_string() == "insurance")
    checks = [e.event_specific_data for e in result.all_events
              if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    failed = [c.check_name for c in checks if not c.passed]
    if failed:
        raise SystemExit(f"{label}: asset checks failed: {failed}")
    return {"asset_s": float(metadata["duration_seconds"].value), "wall_s": wall, "rss_gib": rss.peak_gib,
            "rows_after": int(metadata["rows_after"].value), "checks": len(checks),
            "inserted": int(metadata["rows_inserted"].value), "updated": int(metadata["rows_updated"].value),
            "deleted": int(metadata["rows_deleted"].value)}


# --- baseline: the engine alone ------------------------------------------------------------

def baseline(spark, storage, data: dict) -> dict:
    from pyspark.sql.types import DateType, IntegerType, StringType, StructField, StructType

    spark_types = {"INT": IntegerType(), "DATE": DateType(), "STRING": StringType()}
    schema = StructType([StructField(n, spark_types[t]) for n, _, t in DATA_COLUMNS])
    cdc_schema = StructType([StructField("op", StringType()), *schema.fields])
    storage.put_bytes("base/full.csv", data["full_csv"])
    storage.put_bytes("base/cdc.csv", data["cdc_csv"])
    table = storage.uri("base/policies")
    out = {}
    with RssSampler() as rss:
        started = time.perf_counter()
        spark.read.csv(storage.uri("base/full.csv"), schema=schema, header=True) \
            .write.format("delta").mode("overwrite").save(table)
        out["full_s"] = time.perf_counter() - started
    out["full_rss_gib"] = rss.peak_gib
    with RssSampler() as rss:
        started = time.perf_counter()
        spark.read.csv(storage.uri("base/cdc.csv"), schema=cdc_schema, header=False) \
            .createOrReplaceTempView("base_cdc")
        sets = ", ".join(f"t.{c} = s.{c}" for c in DATA_COLUMN_NAMES if c != "policy_id")
        spark.sql(f"""
            MERGE INTO delta.`{table}` AS t USING base_cdc AS s ON t.policy_id = s.policy_id
            WHEN MATCHED AND s.op = 'D' THEN DELETE
            WHEN MATCHED THEN UPDATE SET {sets}
            WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT ({', '.join(DATA_COLUMN_NAMES)})
                 VALUES ({', '.join('s.' + c for c in DATA_COLUMN_NAMES)})
        """).collect()
        out["merge_s"] = time.perf_counter() - started
    out["merge_rss_gib"] = rss.peak_gib
    out["rows_after"] = spark.read.format("delta").load(table).count()
    return out


# --- main ------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--change-fraction", type=float, default=0.1)
    parser.add_argument("--strategies", default="merge,rewrite",
                        help="CDC strategies to measure, each in its own bucket (merge, rewrite)")
    parser.add_argument("--profile", action="store_true", help="print time per pipeline step")
    parser.add_argument("--keep-home", action="store_true", help="do not delete the temporary LAKE_HOME")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", module="dagster")
    warnings.filterwarnings("ignore", category=UserWarning)

    started = time.perf_counter()
    data = generate(args.rows, args.change_fraction)
    n_changes = data["updates"] + data["inserts"] + data["deletes"]
    print(f"generated {args.rows:,} policies ({len(data['full_csv']) / 1e6:.0f} MB CSV) and {n_changes:,} "
          f"changes ({data['updates']:,} U, {data['inserts']:,} I, {data['deletes']:,} D; "
          f"{len(data['cdc_csv']) / 1e6:.0f} MB) in {time.perf_counter() - started:.1f} s", flush=True)

    home = Path(tempfile.mkdtemp(prefix="lake-bench-"))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "LAKE_S3_ENDPOINT", "LAKE_SPARK_REMOTE",
                 "LAKE_ENGINE", "LAKE_S3_BUCKET"):
        os.environ.pop(name, None)
    port = free_port()
    lease = embedded_s3(home, port, embedded_credentials(home))
    server = lease.__enter__()  # held until the end; leaving it stops the server
    os.environ.update({"LAKE_HOME": str(home), "LAKE_S3_PORT": str(port)})
    try:
        from lake_assets.definitions import build_definitions
        from lake_assets.core.formats.delta import open_table, row_count
        from lake_assets.resources.engine import SparkEngine
        from lake_assets.resources.storage import LakeStorage
        from lake_assets.settings import LakeSettings
        from lake_assets.core.tables import INSURANCE

        from lake_assets.insurance import merge as merge_module

        settings = LakeSettings.from_env()
        spark_storage = LakeStorage.from_settings(settings).with_endpoint(server.endpoint)
        if args.profile:
            profile_pipeline()
        # Warm the engine once (its start is not what we measure); then the baseline.
        spark = SparkEngine.from_settings(settings).session(spark_storage)
        spark.sql("SELECT 1").collect()
        base_storage = LakeStorage(bucket="baseline", home=str(home)).with_endpoint(server.endpoint)
        base_storage.ensure_bucket()
        base = baseline(spark, base_storage, data)
        print(f"baseline: full load {base['full_s']:.2f} s, MERGE {base['merge_s']:.2f} s", flush=True)

        # Each CDC strategy gets its own bucket: full load, then the CDC batch, both through the job.
        auto = "rewrite" if merge_module.prefers_rewrite(n_changes, args.rows) else "merge"
        ours, final_rows = {}, {}
        for strategy in args.strategies.split(","):
            os.environ["LAKE_S3_BUCKET"] = f"lake-{strategy}"
            settings = LakeSettings.from_env()
            storage = LakeStorage.from_settings(settings).with_endpoint(server.endpoint)
            storage.ensure_bucket()
            definitions = build_definitions(settings)
            merge_module.REWRITE_MIN_ROWS = 0 if strategy == "rewrite" else 10**15
            merge_module.REWRITE_FRACTION = 0.0 if strategy == "rewrite" else 1e15
            storage.put_bytes("raw/fullload/policies_full.csv", data["full_csv"])
            full = run_job(definitions, "full load")
            print(f"ours ({strategy} bucket): full load {full['asset_s']:.2f} s in the asset, "
                  f"{full['wall_s']:.2f} s job", flush=True)
            print_profile("full load")
            storage.put_bytes("raw/cdcload/20260101-000000000.csv", data["cdc_csv"])
            cdc = run_job(definitions, strategy)
            print(f"ours: CDC by {strategy} {cdc['asset_s']:.2f} s in the asset, {cdc['wall_s']:.2f} s job",
                  flush=True)
            print_profile(strategy)
            ours[strategy] = (full, cdc)
            final_rows[strategy] = row_count(open_table(storage, INSURANCE))
    finally:
        lease.__exit__(None, None, None)
        if not args.keep_home:
            shutil.rmtree(home, ignore_errors=True)

    expected = data["expected_rows"]
    problems = []
    if base["rows_after"] != expected:
        problems.append(f"baseline: {base['rows_after']:,} rows after the MERGE, expected {expected:,}")
    for strategy, (full, cdc) in ours.items():
        if full["rows_after"] != args.rows:
            problems.append(f"{strategy}: {full['rows_after']:,} rows after the full load, expected {args.rows:,}")
        for name, got in (("delta-rs", final_rows[strategy]), ("metadata", cdc["rows_after"])):
            if got != expected:
                problems.append(f"{strategy} ({name}): {got:,} rows after the CDC batch, expected {expected:,}")
        if (cdc["inserted"], cdc["updated"], cdc["deleted"]) != (data["inserts"], data["updates"], data["deletes"]):
            problems.append(f"{strategy}: commit metrics I/U/D {cdc['inserted']}/{cdc['updated']}/{cdc['deleted']}, "
                            f"expected {data['inserts']}/{data['updates']}/{data['deletes']}")

    def rate(rows: int, seconds: float) -> str:
        return f"{rows / seconds / 1e6:.2f} M rows/s"

    n = args.rows
    print()
    print(f"machine: {os.cpu_count()} cores; {n:,} rows, {n_changes:,} changes; the pipeline's own choice "
          f"for this batch: {auto}; peak RSS of the whole process {peak_rss_gib():.2f} GiB (Sail runs in it)")
    print()
    print("| work | ours: asset `duration_seconds` | ours: job wall (with checks) | baseline: bare engine "
          "| ours/baseline (asset) | ours/baseline (job) | rows/s (asset) | peak RSS ours / baseline |")
    print("|---|---|---|---|---|---|---|---|")
    full = next(iter(ours.values()))[0]
    print(f"| full load {n:,} rows CSV → Delta | {full['asset_s']:.2f} s | {full['wall_s']:.2f} s | "
          f"{base['full_s']:.2f} s | {full['asset_s'] / base['full_s']:.2f}× | {full['wall_s'] / base['full_s']:.2f}× | "
          f"{rate(n, full['asset_s'])} | {full['rss_gib']:.2f} / {base['full_rss_gib']:.2f} GiB |")
    for strategy, (_, cdc) in ours.items():
        how = "one MERGE INTO" if strategy == "merge" else "one rewrite (anti-join ∪ upserts, overwrite)"
        print(f"| CDC {n_changes:,} rows into {n:,}, {how}{' (auto)' if strategy == auto else ''} | "
              f"{cdc['asset_s']:.2f} s | {cdc['wall_s']:.2f} s | {base['merge_s']:.2f} s | "
              f"{cdc['asset_s'] / base['merge_s']:.2f}× | {cdc['wall_s'] / base['merge_s']:.2f}× | "
              f"{rate(n_changes, cdc['asset_s'])} | {cdc['rss_gib']:.2f} / {base['merge_rss_gib']:.2f} GiB |")
    print()
    if problems:
        raise SystemExit("CORRECTNESS FAILED:\n  " + "\n  ".join(problems))
    checks = sum(f["checks"] + c["checks"] for f, c in ours.values())
    print(f"correct: {expected:,} rows = {n:,} + {data['inserts']:,} inserts − {data['deletes']:,} deletes "
          f"(every strategy and the baseline); commit metrics match; {checks} asset checks passed")


if __name__ == "__main__":
    main()
