"""Benchmark: the orchestrator stays flat while the engine does the row work (issue 29's targets).

    uv run --group bench python benchmarks/engine_side.py [--quick] [--json results.json]

Everything runs as a user runs it, in processes of their own, on one private lake (a temporary
LAKE_HOME and its embedded S3 server): a Sail server started by `lake engine serve`, and
`LAKE_SPARK_REMOTE=sc://... lake run` against it, so the orchestrator's memory and the engine's
are told apart. Measured in the same run:

- peak RSS (VmHWM) of the `lake run` process and of the engine server, for a
  full load of 1M rows in one DMS part and of 20M rows in ten (`LOAD00000001.csv` ...
  `LOAD0000000A.csv`): the orchestrator's peak must not grow with the batch (target: the 20M
  peak within 1.2x of the 1M peak, and under 600 MiB);
- a 5M-row full load: `lake run` as a whole process against the bare engine process (Python
  starting the embedded Sail, reading the same object from the same S3 and writing Delta there),
  wall clock of each (target: at most 3x);
- `lake run` with nothing pending (target: at most 3 s), and a 1,000-row CDC file into a 2M-row
  table against that (target: at most 2 s longer).

`--quick` divides the sizes by 20 (a smoke run of the harness; its figures say nothing about the
targets).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from figures import Figure, render  # noqa: E402
from policy_data import FIRST_KEY, full_load_csv  # noqa: E402
from private_lake import private_lake  # noqa: E402

LAKE = str(Path(sys.executable).with_name("lake"))
MIB = 1 << 20
HEADER = ("policy_id,expiry_date,location_name,state_code,region_name,insured_value,business_type,"
          "earthquake_coverage,flood_coverage")


def _rss_of(pid: int) -> int:
    """Peak RSS of a running process, in bytes (VmHWM)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _run(args: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """(wall seconds, peak RSS bytes, output) of one command run to its end, as a user runs it.

    The peak is the process's own VmHWM, read every 10 ms while it runs (monotonic: the last
    reading is its peak but for growth in its final 10 ms). Not the rusage `wait4` returns: a
    child's `ru_maxrss` keeps the high-water mark of the address space it was forked with, this
    script's, which holds the generated CSV (20M rows: 1 GiB reported for a 349 MiB process)."""
    started = time.perf_counter()
    process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = [0]
    running = threading.Event()
    running.set()

    def watch() -> None:
        while running.is_set():
            try:
                peak[0] = max(peak[0], _rss_of(process.pid))
            except OSError:  # exited
                return
            time.sleep(0.01)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    output = process.stdout.read()
    process.wait()
    running.clear()
    watcher.join()
    wall = time.perf_counter() - started
    if process.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(args)} failed ({process.returncode}):\n{output[-3000:]}")
    return wall, peak[0], output


class EngineServer:
    """`lake engine serve --port 0` for the block: its URL and its pid."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen([LAKE, "engine", "serve", "--port", "0"], env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, start_new_session=True)
        for line in self.process.stdout:
            found = re.search(r"sc://127\.0\.0\.1:\d+", line)
            if found:
                self.url = found.group(0)
                return
        raise SystemExit("lake engine serve printed no address")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def _put_parts(storage, folder: str, rows: int, parts: int) -> int:
    """A full load of `rows` policies in `parts` DMS-named parts (hex counters) under raw/fullload/`folder`/."""
    size = -(-rows // parts)
    total = 0
    for part in range(parts):
        count = min(size, rows - part * size)
        body = full_load_csv(count, seed=part)
        lines = body.split(b"\n", 1)[1]  # the generator numbers keys from FIRST_KEY: shift each part's
        shifted = _shift(lines, part * size)
        storage.put_bytes(f"raw/fullload/{folder}/LOAD{part + 1:08X}.csv", HEADER.encode() + b"\n" + shifted)
        total += len(shifted)
    return total


def _shift(lines: bytes, offset: int) -> bytes:
    if not offset:
        return lines
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    table = pacsv.read_csv(pa.py_buffer(HEADER.encode() + b"\n" + lines))
    table = table.set_column(0, "policy_id", pc.add(table["policy_id"], offset))
    import io
    sink = io.BytesIO()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    return sink.getvalue()


BARE = """
import sys, time
started = time.perf_counter()
from lake_assets.resources.spark import SparkConfig
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings
settings = LakeSettings.from_env()
with LakeStorage.from_settings(settings).running() as storage:
  spark = SparkConfig.from_settings(settings).session(storage)
  schema = ("policy_id INT, expiry_date DATE, location_name STRING, state_code STRING, region_name STRING, "
          "insured_value INT, business_type STRING, earthquake_coverage STRING, flood_coverage STRING")
  frame = spark.read.option("header", "true").schema(schema).csv(storage.uri(sys.argv[1]))
  frame.write.format("delta").mode("overwrite").save(storage.uri(sys.argv[2]))
print(f"bare engine process: {time.perf_counter() - started:.2f} s inside the process")
"""


def measure(quick: bool = False) -> list[Figure]:
    scale = 20 if quick else 1
    figures = []
    with private_lake("lake-engine-side-") as (home, server):
        base_env = {**os.environ}
        engine = EngineServer(base_env)
        try:
            remote = {**base_env, "LAKE_SPARK_REMOTE": engine.url}
            peaks = {}
            for rows, parts in ((1_000_000 // scale, 1), (20_000_000 // scale, 10)):
                bucket = f"flat-{parts}"
                env = {**remote, "LAKE_S3_BUCKET": bucket}
                storage = _storage(home, server, bucket)
                size = _put_parts(storage, "dbo/policy", rows, parts)
                wall, peak, output = _run([LAKE, "run"], env)
                peaks[rows] = peak
                figures.append(Figure(f"full load {rows:,} rows in {parts} DMS part(s) ({size / MIB:.0f} MiB CSV), "
                                      "lake run against a remote engine", wall,
                                      peak_gib=peak / (1 << 30),
                                      note=f"lake run peak {peak / MIB:.0f} MiB, engine server peak "
                                           f"{_rss_of(engine.process.pid) / MIB:.0f} MiB"))
            small, large = peaks[1_000_000 // scale], peaks[20_000_000 // scale]
            figures.append(Figure("orchestrator peak RSS, 20M rows / 1M rows", large / MIB, small / MIB, "1M-row peak (MiB)",
                                  target="<= 1.2x and < 600 MiB",
                                  met=large <= 1.2 * small and large < 600 * MIB,
                                  note=f"{large / MIB:.0f} MiB against {small / MIB:.0f} MiB", unit="MiB"))
        finally:
            engine.stop()

        # a 5M-row full load: the whole `lake run` process against the bare engine process, embedded Sail both
        rows = 5_000_000 // scale
        storage = _storage(home, server, "five")
        body = full_load_csv(rows)
        storage.put_bytes("raw/fullload/full.csv", body)
        storage.put_bytes("bare/full.csv", body)
        env = {**os.environ, "LAKE_S3_BUCKET": "five"}
        bare, _, printed = _run([sys.executable, "-c", BARE, "bare/full.csv", "bare/table"], env)
        ours, peak, _ = _run([LAKE, "run"], env)
        figures.append(Figure(f"full load {rows:,} rows, lake run (whole process)", ours, bare,
                              "bare engine process (start, read, write Delta)", peak_gib=peak / (1 << 30),
                              target="<= 3x", met=ours <= 3 * bare, note=printed.strip()))

        # nothing pending, then 1,000 CDC rows into a 2M-row table
        storage = _storage(home, server, "cdc")
        env = {**os.environ, "LAKE_S3_BUCKET": "cdc"}
        storage.put_bytes("raw/fullload/full.csv", full_load_csv(2_000_000 // scale))
        _run([LAKE, "run"], env)
        idle, _, _ = _run([LAKE, "run"], env)
        figures.append(Figure("lake run with nothing pending", idle, target="<= 3 s", met=idle <= 3))
        keys = range(FIRST_KEY, FIRST_KEY + 2_000_000 // scale, max(1, 2_000 // scale))
        cdc = "".join(f"U,{k},2026-01-31,Urban,CA,West,{k % 997},Retail,N,Y\n" for k in list(keys)[:1000])
        storage.put_bytes("raw/cdcload/20260101-000000000.csv", cdc.encode())
        one, _, _ = _run([LAKE, "run"], env)
        figures.append(Figure("lake run, 1,000 CDC rows into a 2M-row table", one, idle, "nothing pending",
                              target="<= +2 s", met=one - idle <= 2, note=f"{one - idle:+.2f} s"))
    return figures


def _storage(home: Path, server, bucket: str):
    """The private lake's `bucket` (created)."""
    from lake_assets.resources.storage import LakeStorage

    storage = LakeStorage(bucket=bucket, home=str(home)).with_endpoint(server.endpoint)
    storage.ensure_bucket()
    return storage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    figures = measure(args.quick)
    print(render(figures))
    if args.json:
        args.json.write_text(json.dumps([f.as_dict() for f in figures], indent=2))


if __name__ == "__main__":
    main()
