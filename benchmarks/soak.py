"""Soak: ordinary production deliveries under chaos, then compare the lake with a model.

Drives the installed `lake` command only, in a scratch LAKE_HOME with its own embedded S3:
CDC files (AWS DMS names, timestamps in the name) are delivered in a shuffled order, so
many arrive late; while they land, one to three `lake run`s start at once, some are killed
with SIGKILL at a random moment, and now and then the embedded S3 server is SIGKILLed
too. Then everything still pending is applied and the table is compared with a pure-Python
model: every change applied in sequence (file timestamp, then row) order, which is what
per-key sequencing promises whatever order files arrive in. Every raw row must be
accounted for (applied + superseded + quarantined = rows in the file).

    uv run python benchmarks/soak.py [--seconds 120] [--seed 7]

Bounded: the chaos phase stops after --seconds, the convergence phase after a fixed
number of `lake run`s. Prints the figures and exits non-zero on any lost, duplicated or
unaccounted row.
"""

import argparse
import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
HEADER = "policy_id,expiry_date,location_name,state_code,region_name,insured_value,business_type,earthquake_coverage,flood_coverage"
KEYS = 60
CONVERGE_RUNS = 8


@dataclass
class Delivery:
    name: str  # object key under raw/cdcload/
    body: str
    changes: list[tuple[int, str, int | None]]  # (key, op, insured_value) of the valid rows, in file order
    rows: int


@dataclass
class Figures:
    deliveries: int = 0
    runs_started: int = 0
    concurrent_batches: int = 0
    runs_killed: int = 0
    s3_killed: int = 0
    runs_failed: int = 0
    converge_runs: int = 0
    extra: dict = field(default_factory=dict)


def _row(key: int, value: int) -> str:
    return f"{key},2025-01-31,Urban,CA,West,{value},Retail,N,Y"


def make_deliveries(rng: random.Random, count: int) -> list[Delivery]:
    """`count` CDC files with increasing DMS timestamps; ~1 in 15 rows is invalid."""
    start = dt.datetime(2025, 1, 1, 9)
    value = 1000
    deliveries = []
    for index in range(count):
        stamp = start + dt.timedelta(minutes=index)
        name = stamp.strftime("%Y%m%d-%H%M%S") + f"{stamp.microsecond // 1000:03d}.csv"
        lines, changes = [], []
        for _ in range(rng.randint(1, 8)):
            key = rng.randint(1, KEYS)
            draw = rng.random()
            if draw < 0.07:
                lines.append(f"U,{key},2025-02-30,Urban,CA,West,1,Retail,N,Y")  # impossible date
            elif draw < 0.27:
                lines.append(f"D,{key},,,,,,,,")
                changes.append((key, "D", None))
            else:
                value += 1
                op = rng.choice("IU")
                lines.append(f"{op},{_row(key, value)}")
                changes.append((key, op, value))
        deliveries.append(Delivery(name, "\n".join(lines) + "\n", changes, len(lines)))
    return deliveries


def model(full_load: dict[int, int], deliveries: list[Delivery]) -> dict[int, int]:
    """The table after every change, in sequence order: files by timestamp, rows in file order."""
    state = dict(full_load)
    for delivery in sorted(deliveries, key=lambda d: d.name):
        for key, op, value in delivery.changes:
            if op == "D":
                state.pop(key, None)
            else:
                state[key] = value
    return state


class Lake:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {**os.environ, "LAKE_HOME": str(home)}
        for name in ("LAKE_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DAGSTER_HOME", "LAKE_S3_BUCKET"):
            self.env.pop(name, None)
        sys.path.insert(0, str(REPO))
        from lake_assets.resources.embedded_s3 import free_port

        self.env["LAKE_S3_PORT"] = str(free_port())

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "lake"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=REPO)

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([str(BIN / "lake"), *args], env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=REPO, start_new_session=True)

    def put(self, deliveries: list[tuple[str, str, str]]) -> None:
        """Land (zone, name, body) objects through the project's storage, holding a lease on the
        embedded server like any command does (it starts the server if a kill took it down)."""
        from botocore.exceptions import BotoCoreError, ClientError

        from lake_assets.core.errors import LakeError
        from lake_assets.resources.embedded_s3 import embedded_s3
        from lake_assets.resources.storage import LakeStorage
        from lake_assets.settings import embedded_credentials

        for attempt in range(3):
            try:
                with embedded_s3(self.home, int(self.env["LAKE_S3_PORT"]), embedded_credentials(self.home)) as server:
                    storage = LakeStorage(home=str(self.home)).with_endpoint(server.endpoint)
                    storage.ensure_bucket()
                    for zone, name, body in deliveries:
                        storage.put_bytes(f"raw/{zone}/{name}", body.encode())
                return
            except (LakeError, BotoCoreError, ClientError):  # the server was just killed: try again
                if attempt == 2:
                    raise

    def kill_s3(self) -> bool:
        state = self.home / "s3-server.json"
        try:
            pid = int(json.loads(state.read_text())["pid"])
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            return False
        return True

    def wait_stopped(self, timeout: float = 60) -> None:
        """Wait for the last command's embedded server to be gone: a command's exit only asks it to
        stop (weed takes a second or more), and its data directory must not be removed under it."""
        from lake_assets.resources.s3_supervisor import STATE_FILE, STOPPING_FILE, supervisors_of
        from lake_assets_tests.helpers.lake_dev import wait_for

        wait_for(lambda: not (self.home / STATE_FILE).exists() and not (self.home / STOPPING_FILE).exists()
                 and not supervisors_of(self.home), timeout, "the embedded S3 server to stop", interval=0.1)

    def json(self, *args: str) -> list[dict]:
        result = self.run(*args, "--format", "json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)


def soak(seconds: float, seed: int, workdir: Path) -> tuple[Figures, list[str]]:
    rng = random.Random(seed)
    lake = Lake(workdir / "home")
    figures = Figures()

    full = {key: key for key in range(1, KEYS + 1)}
    lake.put([("fullload", "full-load.csv", "\n".join([HEADER, *(_row(k, v) for k, v in full.items())]) + "\n")])
    assert lake.run("run").returncode == 0

    deliveries = make_deliveries(rng, 400)
    queue = list(deliveries)
    # Shuffle within a window: files arrive up to 6 places out of order, so many are late.
    for i in range(len(queue)):
        j = min(len(queue) - 1, i + rng.randint(0, 6))
        queue[i], queue[j] = queue[j], queue[i]
    delivered: list[Delivery] = []

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and queue:
        batch = [queue.pop(0) for _ in range(min(len(queue), rng.randint(1, 4)))]
        lake.put([("cdcload", d.name, d.body) for d in batch])
        delivered.extend(batch)
        runs = [lake.start("run") for _ in range(rng.choice([1, 1, 2, 3]))]
        figures.runs_started += len(runs)
        figures.concurrent_batches += len(runs) > 1
        if rng.random() < 0.35:
            time.sleep(rng.uniform(0.2, 4.0))
            victim = rng.choice(runs)
            if victim.poll() is None:
                os.killpg(victim.pid, signal.SIGKILL)
                figures.runs_killed += 1
        if rng.random() < 0.12:
            time.sleep(rng.uniform(0.0, 2.0))
            figures.s3_killed += lake.kill_s3()
        for run in runs:
            try:
                code = run.wait(timeout=300)
            except subprocess.TimeoutExpired:
                os.killpg(run.pid, signal.SIGKILL)
                code = run.wait()
            figures.runs_failed += code not in (0, -signal.SIGKILL)
    figures.deliveries = len(delivered)

    # Converge: a few plain runs must apply everything still pending.
    for _ in range(CONVERGE_RUNS):
        figures.converge_runs += 1
        lake.run("run")
        if not any(row["status"].startswith("pending") for row in lake.json("status")):
            break
    problems = compare(lake, full, delivered)
    lake.wait_stopped()
    return figures, problems


def compare(lake: Lake, full: dict[int, int], delivered: list[Delivery]) -> list[str]:
    """Problems found: the table against the model, and every file's accounting."""
    problems = []
    rows = lake.json("query", "SELECT policy_id, insured_value FROM insurance")
    table = {row["policy_id"]: row["insured_value"] for row in rows}
    if len(table) != len(rows):
        problems.append(f"duplicated keys: {len(rows) - len(table)}")
    expected = model(full, delivered)
    lost = sorted(k for k in expected if k not in table)
    extra = sorted(k for k in table if k not in expected)
    wrong = sorted(k for k in expected if k in table and table[k] != expected[k])
    if lost or extra or wrong:
        problems.append(f"table differs from the model: lost {lost}, resurrected {extra}, wrong values {wrong}")
    status = {row["file"]: row for row in lake.json("status")}
    for delivery in delivered:
        row = status.get(f"raw/cdcload/{delivery.name}")
        if row is None or row["status"].startswith("pending"):
            problems.append(f"{delivery.name} never applied")
            continue
        accounted = (row["applied"] or 0) + (row["superseded"] or 0) + (row["quarantined"] or 0)
        if row["rows"] != delivery.rows or accounted != delivery.rows:
            problems.append(f"{delivery.name}: {delivery.rows} rows, ledger says {row}")
    # the quarantine holds exactly the rows the ledger says were quarantined, each once (the table
    # exists only once a row has been quarantined)
    counted = sum(status[f"raw/cdcload/{d.name}"]["quarantined"] or 0 for d in delivered
                  if f"raw/cdcload/{d.name}" in status)
    held = lake.json("query", "SELECT source_file, line_number, count(*) AS n FROM insurance_quarantine "
                              "WHERE source_file LIKE 'raw/cdcload/%' GROUP BY source_file, line_number") if counted else []
    if twice := [row for row in held if row["n"] > 1]:
        problems.append(f"rows quarantined twice: {twice}")
    if len(held) != counted:
        problems.append(f"the quarantine holds {len(held)} CDC rows, the ledger counts {counted}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    # The soak always runs on its own embedded server, with the credentials generated for it.
    for name in ("LAKE_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.pop(name, None)
    with tempfile.TemporaryDirectory(prefix="lake-soak-") as workdir:
        started = time.monotonic()
        figures, problems = soak(args.seconds, args.seed, Path(workdir))
        elapsed = time.monotonic() - started
    print(f"soak {elapsed:.0f} s (seed {args.seed}): {figures.deliveries} deliveries, "
          f"{figures.runs_started} lake runs ({figures.concurrent_batches} concurrent batches), "
          f"{figures.runs_killed} runs killed -9, {figures.s3_killed} S3 servers killed -9, "
          f"{figures.runs_failed} runs failed cleanly, converged in {figures.converge_runs} run(s)")
    for problem in problems:
        print("PROBLEM:", problem)
    print("zero lost, zero duplicated, every raw row accounted for" if not problems else "FAILED")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
