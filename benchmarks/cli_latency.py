"""How long read-only `lake` commands take, with nothing running and with `lake dev` running.

    uv run python benchmarks/cli_latency.py [--quick]

Each command runs as a subprocess, as a user types it, against a lake holding a small
table; the figure is the median wall time of the repetitions.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from figures import Figure, render  # noqa: E402

COMMANDS = {  # command -> (target with lake dev running, target with nothing running), seconds
    ("status",): (0.5, 1.5),  # issue 31's targets: `lake dev` answers it (cli/dev_status.py)
    ("query", "SELECT 1"): (2.0, 4.0),
    ("history", "insurance"): (1.0, 3.0),
}
BIN = Path(sys.executable).parent


def _server_gone(home: Path) -> bool:
    """No embedded S3 server runs or is still stopping under `home` (LAKE_HOME)."""
    from lake_assets.resources.s3_supervisor import STATE_FILE, STOPPING_FILE

    return not (home / STATE_FILE).exists() and not (home / STOPPING_FILE).exists()


def _median_seconds(args: tuple[str, ...], env: dict[str, str], repeat: int, cold: Path | None = None) -> float:
    """The median wall time of `lake ARGS`; with `cold` (LAKE_HOME), each repetition starts once the
    last one's embedded server has stopped (weed's shutdown takes ~1.5 s; a command typed during it
    waits for it)."""
    from lake_assets_tests.helpers.lake_dev import wait_for

    times = []
    for _ in range(repeat):
        if cold is not None:
            wait_for(lambda: _server_gone(cold), 30, "the last command's server to stop", interval=0.05)
        started = time.perf_counter()
        result = subprocess.run([str(BIN / "lake"), *args], env=env, capture_output=True, text=True, timeout=300)
        times.append(time.perf_counter() - started)
        if result.returncode != 0:
            raise RuntimeError(f"lake {' '.join(args)} failed: {result.stderr}")
    return statistics.median(times)


def measure(quick: bool = False) -> list[Figure]:
    from lake_assets.resources.storage import LakeStorage
    from lake_assets_tests.helpers.lake_dev import lake_dev, wait_for

    repeat = 2 if quick else 5
    figures = []
    with tempfile.TemporaryDirectory(prefix="lake-cli-latency-") as tmp:
        with lake_dev(Path(tmp)) as dev:
            storage = LakeStorage(bucket="lake", home=str(dev.home)).attached()
            storage.put_bytes("raw/fullload/full-load.csv",
                              b"policy_id,expiry_date,location_name,state_code,region_name,insured_value,"
                              b"business_type,earthquake_coverage,flood_coverage\n1,2025-01-31,Urban,CA,West,1,Retail,N,N\n")
            wait_for(lambda: '"status": "applied"' in dev.lake("status", "--format", "json").stdout, 300, "the table")
            for args, (running_target, _) in COMMANDS.items():
                seconds = _median_seconds(args, dev.env, repeat)
                figures.append(Figure(f"`lake {' '.join(args)}` with lake dev running", seconds,
                                      target=f"<= {running_target:g} s", met=seconds <= running_target))
            env = dict(dev.env)
        for args, (_, idle_target) in COMMANDS.items():  # `lake dev` stopped: the command starts what it needs
            seconds = _median_seconds(args, env, repeat, cold=Path(env["LAKE_HOME"]))
            figures.append(Figure(f"`lake {' '.join(args)}` with nothing running", seconds,
                                  target=f"<= {idle_target:g} s", met=seconds <= idle_target))
        seconds = _median_seconds(("status",), env, repeat)
        figures.append(Figure("`lake status` right after another command (its server still stopping)", seconds,
                              note="waits for the last command's weed to shut down, then starts one"))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two repetitions")
    args = parser.parse_args()
    print(render(measure(args.quick)))


if __name__ == "__main__":
    main()
