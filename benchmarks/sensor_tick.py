"""The raw-zone sensor's tick time against the number of files already in the raw zone.

    uv run python benchmarks/sensor_tick.py [--quick]

For each history size N, N tiny CDC objects are put (a thread pool) on the embedded S3
server, the sensor's cursor is brought past them (a first tick and one full sweep pass:
the state of a sensor that has seen them all), and then the median of steady ticks is
measured: one new file each (what `lake dev` sees in production), and a burst of 50 new
files, which must give ONE run request. The baseline is the previous sensor's way,
listing every object of both prefixes each tick (`list_everything`, what dagster-aws's
`get_objects` does, which it used).
"""

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from figures import Figure, render  # noqa: E402

ROW = b"I,1,2024-01-01,Urban,NY,East,1,Retail,N,N\n"


def _name(n: int) -> str:
    return f"raw/cdcload/20240101-{n:09d}.csv"


def _timed(work) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def list_everything(client, bucket: str, prefix: str) -> list[dict]:
    """Every object under `prefix`, page by page (the previous sensor's listing)."""
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="")
    return [o for page in pages for o in page.get("Contents", [])]


def measure(histories: tuple[int, ...] = (1_000, 10_000, 100_000), quick: bool = False) -> list[Figure]:
    import dagster as dg

    from lake_assets.resources.embedded_s3 import embedded_s3, free_port
    from lake_assets.resources.storage import LakeStorage
    from lake_assets.core.registry import declaration
    from lake_assets.declared import sensors
    from lake_assets.sensors import discovery
    from lake_assets.settings import embedded_credentials

    insurance = declaration("insurance")
    histories = (200, 1_000) if quick else histories
    figures = []
    with tempfile.TemporaryDirectory(prefix="lake-sensor-tick-") as home, \
            embedded_s3(Path(home), free_port(), embedded_credentials(Path(home))):
        storage = LakeStorage(bucket="lake", home=home).attached()
        storage.ensure_bucket()
        client = storage.get_client()
        have, arrivals = 0, 0
        for size in histories:
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda n: client.put_object(Bucket=storage.bucket, Key=_name(n), Body=ROW),
                              range(have, size)))
            have = size
            # A sensor that has seen them all and swept them twice since (its steady state):
            # the sensor's clock moves an hour a pass here, so what it requested ages out.
            start = dt.datetime.now(dt.timezone.utc)
            cursor = sensors.raw_zone_tick(insurance, storage, None, start).cursor
            for sweep in range(3):
                for _ in range(size // discovery.SWEEP_PAGE + 2):
                    cursor = sensors.raw_zone_tick(insurance, storage, cursor, start + dt.timedelta(hours=sweep)).cursor
            later = start + dt.timedelta(hours=3)
            ticks = []
            for _ in range(5):
                arrivals += 1  # new names sort after every earlier one, as DMS names do
                client.put_object(Bucket=storage.bucket, Key=_name(10**8 + arrivals), Body=ROW)
                started = time.perf_counter()
                result = sensors.raw_zone_tick(insurance, storage, cursor, later)
                ticks.append(time.perf_counter() - started)
                assert len(result.run_requests) == 1, "a new file must start a run"
                cursor = result.cursor
            for _ in range(50):
                arrivals += 1
                client.put_object(Bucket=storage.bucket, Key=_name(10**8 + arrivals), Body=ROW)
            burst = sensors.raw_zone_tick(insurance, storage, cursor, later)
            assert len(burst.run_requests) == 1 and burst.run_requests[0].tags["lake/objects"] == "50"
            baseline = statistics.median(
                _timed(lambda: [o for p in sensors.zone(insurance).prefixes for o in list_everything(client, storage.bucket, p)])
                for _ in range(3))
            tick = statistics.median(ticks)
            figures.append(Figure(f"sensor tick, {size:,} files applied", tick, baseline, "list everything",
                                  target="<= 0.2 s whatever N", met=tick <= 0.2,
                                  note=f"a burst of 50 new files: 1 run request; cursor {len(cursor):,} bytes"))
            assert isinstance(burst, dg.SensorResult)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 and 1,000 files")
    args = parser.parse_args()
    print(render(measure(quick=args.quick)))


if __name__ == "__main__":
    main()
