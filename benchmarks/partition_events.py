"""What a declared table's Dagster partitions cost a run that loads many of them.

    uv run python benchmarks/partition_events.py [--partitions 1000 1824]

A run of a table of partition snapshots that the sensor or `lake run` starts (not partitioned)
gives each partition it loaded a materialization of its own (declared/partitions.py): a first
load of a table of a partition per day logs one per day. On an instance configured by the
repository's dagster.yaml (the lake's event log), in a temporary DAGSTER_HOME, one op registers N
dynamic partitions and logs N partition materializations with a partition's counts, as
`record_partitions` does: as one batch (`event_log.log_asset_events`, what the lake does) and,
the baseline in the same run, one `context.log_event` each. Prints the seconds of each and
the ratio.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def logged_seconds(partitions: int, batched: bool) -> float:
    """Seconds one op takes to register `partitions` partitions and log a materialization of each."""
    import dagster as dg

    from lake_assets.event_log import log_asset_events

    name = f"days_{partitions}_{'batch' if batched else 'each'}"
    days = dg.DynamicPartitionsDefinition(name=name)
    seconds: list[float] = []

    @dg.asset(key=name, partitions_def=days)
    def table(context: dg.AssetExecutionContext) -> None:
        keys = [f"day-{i:05d}" for i in range(partitions)]
        start = time.perf_counter()
        context.instance.add_dynamic_partitions(name, keys)
        events = [dg.AssetMaterialization(asset_key=name, partition=key, metadata={
            "partition_objects": 1, "partition_rows_applied": 400, "partition_rows_superseded": 0,
            "partition_rows_quarantined": 0, "partition_source_objects": dg.MetadataValue.json([f"raw/{key}.dat"])})
            for key in keys]
        if batched:
            log_asset_events(context, events)
        else:
            for event in events:
                context.log_event(event)
        seconds.append(time.perf_counter() - start)

    with dg.DagsterInstance.get() as instance:
        dg.materialize([table], instance=instance, run_config=QUIET)
    return seconds[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[100, 1000, 1824])
    args = parser.parse_args()
    from lake_assets.cli.session import DAGSTER_ENV

    with tempfile.TemporaryDirectory(prefix="partition-events-") as home:
        (Path(home) / "dagster.yaml").write_text((HERE.parent / "dagster.yaml").read_text())
        os.environ["DAGSTER_HOME"] = home
        for variable, value in DAGSTER_ENV.items():
            os.environ.setdefault(variable, value)
        print(f"{'partitions':>10}  {'one batch':>10}  {'one by one':>10}  ratio")
        for count in args.partitions:
            batch, each = logged_seconds(count, True), logged_seconds(count, False)
            print(f"{count:>10}  {batch:>9.2f}s  {each:>9.2f}s  {each / batch:.1f}x")


if __name__ == "__main__":
    main()
