"""Freshness: a CDC file put into raw/cdcload/ under `lake dev` -> its row committed.

    uv run python benchmarks/freshness.py [--files 20] [--quick] [--no-baseline]

Starts `lake dev` as a user would (its own LAKE_HOME in a temp dir, free ports; stopped
with Ctrl-C by PID), loads a small table, then puts CDC files one at a time and polls the
table's log (one S3 LIST) and, once it has grown, the table (delta-rs) until each file's row
is there. The breakdown per file comes from the Dagster run the sensor started: sensor wait
(put -> run created), queue and launch (created -> started), apply (started -> materialization
of `insurance`), and checks and derived tables (materialization -> run end; the row is already
visible then).

It does this twice in one run: with the lake's run launcher as configured (each run's
process forked from one that imported the code location before the run came:
`lake_assets/run_launcher.py`), and, as the baseline, with `LAKE_PRESTART_RUNS=0` (a run's
process starts when the run is launched, as with Dagster's default launcher; at most 5 files).
Both with the lake's sensors as configured (each tick keeps listing at the pace of
LAKE_SENSOR_INTERVAL_SECONDS for LAKE_SENSOR_WAIT_SECONDS, `lake_assets/sensors/polling.py`).
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from figures import Figure, render  # noqa: E402

HEADER = "policy_id,expiry_date,location_name,state_code,region_name,insured_value,business_type," \
         "earthquake_coverage,flood_coverage"


def _row(key: int) -> str:
    return f"{key},2025-01-31,Urban,CA,West,{1000 + key},Retail,N,N"


def _visible(storage, key: int) -> bool:  # LakeStorage
    import pyarrow.compute as pc

    from lake_assets.core.formats.delta import open_table
    from lake_assets.core.tables import table as lake_table
    INSURANCE = lake_table("insurance")

    table = open_table(storage, INSURANCE)
    if table is None:
        return False
    found = table.to_pyarrow_dataset().to_table(columns=["policy_id"], filter=pc.field("policy_id") == key)
    return found.num_rows == 1


def _commits(storage) -> int:  # LakeStorage
    """The commits in the insurance table's log: one S3 LIST, what the poll for a row looks at first.
    Opening the table for every look (delta-rs) cost a third of a core at a 50-ms pace, taken from
    the run it waits for; the row is looked for once the log has grown."""
    from lake_assets.core.tables import table as lake_table

    listed = storage.get_client().list_objects_v2(Bucket=storage.bucket,
                                                  Prefix=f"{lake_table('insurance').prefix.rstrip('/')}/_delta_log/")
    return sum(1 for o in listed.get("Contents", []) if o["Key"].endswith(".json"))


def _breakdown(dagster_home: Path, since: float) -> list[dict]:
    """Per sensor run of apply_insurance created after `since`: its phase timestamps."""
    import os

    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(dagster_home)
    with dg.DagsterInstance.get() as instance:
        runs = []
        for record in instance.get_run_records(dg.RunsFilter(job_name="apply_insurance")):
            if record.create_timestamp.timestamp() < since or record.dagster_run.tags.get("dagster/sensor_name") is None:
                continue
            materialized = [e.timestamp for e in instance.all_logs(record.dagster_run.run_id,
                                                                    of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
                            if e.dagster_event.asset_key == dg.AssetKey("insurance")]
            runs.append({"created": record.create_timestamp.timestamp(), "started": record.start_time,
                         "materialized": min(materialized) if materialized else None, "ended": record.end_time})
        return sorted(runs, key=lambda r: r["created"])


def latencies_under_lake_dev(files: int, prestart: bool) -> tuple[list[float], dict[str, list[float]]]:
    """Put `files` CDC files one at a time under `lake dev`: each file's latency, and the phases."""
    from lake_assets.resources.storage import LakeStorage
    from lake_assets_tests.helpers.lake_dev import lake_dev, wait_for

    with tempfile.TemporaryDirectory(prefix="lake-freshness-", ignore_cleanup_errors=True) as tmp, \
            lake_dev(Path(tmp), **({} if prestart else {"LAKE_PRESTART_RUNS": "0"})) as dev:
        storage = LakeStorage(bucket="lake", home=str(dev.home)).attached()
        storage.put_bytes("raw/fullload/full-load.csv", ("\n".join([HEADER, *(_row(k) for k in range(1, 101))]) + "\n")
                          .encode())
        wait_for(lambda: _visible(storage, 100), 300, "the full load")
        wait_for(dev.idle, 300, "the full load's checks", interval=0.2)
        started = time.time()
        latencies, puts = [], []
        for n in range(files):
            key = 1000 + n
            commits = _commits(storage)
            put_at = time.time()
            storage.put_bytes(f"raw/cdcload/20250101-{n:06d}000.csv", f"I,{_row(key)}\n".encode())
            wait_for(lambda key=key, commits=commits: _commits(storage) > commits and _visible(storage, key), 120,
                     f"policy {key}", interval=0.05)
            latencies.append(time.time() - put_at)
            puts.append(put_at)
            # each file meets an idle lake (a file landing while the previous run checks queues behind it)
            wait_for(dev.idle, 120, "the run's checks", interval=0.2)
        runs = _breakdown(dev.home / "dagster", started)
    phases = {"sensor wait": [], "queue + launch": [], "apply": [], "checks + derived": []}
    for put_at in puts:
        run = next((r for r in runs if r["created"] >= put_at - 0.5), None)
        if run is None or run["started"] is None or run["materialized"] is None or run["ended"] is None:
            continue
        phases["sensor wait"].append(run["created"] - put_at)
        phases["queue + launch"].append(run["started"] - run["created"])
        phases["apply"].append(run["materialized"] - run["started"])
        phases["checks + derived"].append(run["ended"] - run["materialized"])
    return latencies, phases


def percentiles(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def measure(files: int = 20, quick: bool = False, baseline: bool = True) -> list[Figure]:
    files = 5 if quick else files
    latencies, phases = latencies_under_lake_dev(files, prestart=True)
    p50, p95 = percentiles(latencies)
    base_p50 = base_p95 = None
    base_note = ""
    if baseline:  # at most 5 files
        base_latencies, base_phases = latencies_under_lake_dev(min(files, 5), prestart=False)
        base_p50, base_p95 = percentiles(base_latencies)
        base_note = ("; baseline (LAKE_PRESTART_RUNS=0, a run's process started at its launch, "
                    f"{min(files, 5)} files) " + _phase_note(base_phases))
    return [
        Figure(f"freshness p50, {files} CDC files under lake dev", p50, baseline_seconds=base_p50,
               baseline="process started at launch", target="<= 3 s", met=p50 <= 3,
               note=f"prestarted runs {_phase_note(phases)}{base_note}"),
        Figure(f"freshness p95, {files} CDC files under lake dev", p95, baseline_seconds=base_p95,
               baseline="process started at launch", target="<= 8 s", met=p95 <= 8,
               note=f"max {max(latencies):.1f} s"),
    ]


def _phase_note(phases: dict[str, list[float]]) -> str:
    return "median phases: " + ", ".join(f"{name} {statistics.median(values):.1f} s"
                                         for name, values in phases.items() if values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="5 files")
    parser.add_argument("--no-baseline", action="store_true", help="skip the run with LAKE_PRESTART_RUNS=0")
    args = parser.parse_args()
    print(render(measure(args.files, args.quick, baseline=not args.no_baseline)))


if __name__ == "__main__":
    main()
