"""The orchestrator never holds a batch's rows (issue 29): a `lake run` against a remote engine
applies a full load larger than the memory the run process is allowed beyond a small run's.

The engine is a Sail server in its own process (`lake engine serve`), as a user outgrowing one
machine runs it. The run process's address space is capped (RLIMIT_AS) at what a 10-row full
load took plus `HEADROOM`; the big load (`ROWS` rows in two DMS parts) must still apply, every
row. The test also measures, in a process of its own, what merely reading the big load's bytes
into Arrow takes, and asserts it is more than the headroom: a run that parsed, validated or
resolved the batch in the orchestrator (as the insurance pipeline did before, 891 MiB for 1M
rows) could not fit under the cap.
"""

import io
import re
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pytest
from deltalake import DeltaTable

from lake_assets.core.tables import TABLES
from lake_assets.resources.embedded_s3 import EmbeddedS3
from lake_assets_tests.helpers.lakes import LAKE, Lake, drop, new_lake

pytestmark = pytest.mark.integration

ROWS = 600_000
HEADROOM = 96 << 20
HEADER = ("policy_id,expiry_date,location_name,state_code,region_name,insured_value,business_type,"
          "earthquake_coverage,flood_coverage")


def _policies(first: int, count: int) -> bytes:
    """`count` policies from id `first`, as a DMS full-load part (header line included)."""
    ids = pa.array(range(first, first + count), pa.int64())
    table = pa.table({
        "policy_id": ids,
        "expiry_date": pa.array(["2026-12-31"] * count),
        "location_name": pc.binary_join_element_wise("Town ", pc.cast(pc.bit_wise_and(ids, 1023), pa.string()), ""),
        "state_code": pa.array(["CA"] * count),
        "region_name": pa.array(["West"] * count),
        "insured_value": pc.multiply(pc.bit_wise_and(ids, 65535), 7),
        "business_type": pa.array(["Retail"] * count),
        "earthquake_coverage": pa.array(["N"] * count),
        "flood_coverage": pa.array(["Y"] * count),
    })
    sink = io.BytesIO()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=True, quoting_style="none"))
    return sink.getvalue()


@pytest.fixture
def engine(lakes: tuple[Lake, Lake]) -> Iterator[str]:
    """A Sail server in its own process, as `lake engine serve` runs it for the lakes' home (their S3
    server and keys); its Spark Connect URL."""
    server = subprocess.Popen([LAKE, "engine", "serve", "--port", "0"], env=lakes[0].env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        url = None
        for line in server.stdout:
            found = re.search(r"sc://127\.0\.0\.1:\d+", line)
            if found:
                url = found.group(0)
                break
        assert url, "lake engine serve printed no address"
        yield url
    finally:
        server.terminate()
        server.wait(timeout=60)


@pytest.fixture
def lakes(s3_server: EmbeddedS3, lake_home: Path) -> Iterator[tuple[Lake, Lake]]:
    small, big = new_lake(s3_server, lake_home, "mem-small"), new_lake(s3_server, lake_home, "mem-big")
    yield small, big
    drop(small)
    drop(big)


def _run(lake: Lake, url: str, cap: int | None = None) -> tuple[subprocess.CompletedProcess, int]:
    """`lake run` against the remote engine, under an address-space cap if given; its output and its
    peak address space (VmPeak, sampled until it ends)."""
    def limit() -> None:
        if cap is not None:
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    process = subprocess.Popen([LAKE, "run"], env={**lake.env, "LAKE_SPARK_REMOTE": url}, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, preexec_fn=limit)
    peak = 0
    while process.poll() is None:
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
            peak = max(peak, int(re.search(r"VmPeak:\s+(\d+) kB", status).group(1)) << 10)
        except (OSError, AttributeError):
            pass
        time.sleep(0.02)
    output = process.stdout.read()
    return subprocess.CompletedProcess(process.args, process.returncode, output), peak


def _arrow_cost(files: list[Path]) -> int:
    """Bytes of peak RSS a fresh process adds by reading `files` (CSV) into Arrow tables."""
    # VmHWM, not ru_maxrss: the latter starts from the forking parent's peak (Linux keeps it across exec)
    script = ("import re, sys, pyarrow as pa, pyarrow.csv as c\n"
              "hwm = lambda: int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
              "before = hwm()\n"
              "tables = [c.read_csv(pa.py_buffer(open(p, 'rb').read())) for p in sys.argv[1:]]\n"
              "print((hwm() - before) * 1024)\n")
    return int(subprocess.run([sys.executable, "-c", script, *map(str, files)], capture_output=True, text=True,
                              check=True).stdout)


def test_a_load_bigger_than_the_orchestrators_headroom_applies_on_a_remote_engine(
        lakes: tuple[Lake, Lake], engine: str, tmp_path: Path) -> None:
    small, big = lakes
    small.storage.put_bytes("raw/fullload/dbo/policy/LOAD00000001.csv", _policies(1, 10))
    done, baseline = _run(small, engine)
    assert done.returncode == 0, done.stdout[-3000:]

    half = ROWS // 2
    parts = [_policies(1, half), _policies(1 + half, ROWS - half)]
    files = []
    for number, part in enumerate(parts, start=1):
        big.storage.put_bytes(f"raw/fullload/dbo/policy/LOAD{number:08X}.csv", part)
        files.append(tmp_path / f"part{number}.csv")
        files[-1].write_bytes(part)
    assert _arrow_cost(files) > HEADROOM  # holding the batch in the orchestrator would not fit under the cap

    applied, _ = _run(big, engine, cap=baseline + HEADROOM)
    assert applied.returncode == 0, applied.stdout[-3000:]
    assert f"rows 0 -> {ROWS}" in applied.stdout, applied.stdout[-3000:]
    table = DeltaTable(TABLES["insurance"].uri(big.storage), storage_options=big.storage.delta_storage_options())
    ids = table.to_pyarrow_dataset().to_table(columns=["policy_id"])["policy_id"]
    assert (len(ids), pc.min(ids).as_py(), pc.max(ids).as_py(), pc.count_distinct(ids).as_py()) == (
        ROWS, 1, ROWS, ROWS)
