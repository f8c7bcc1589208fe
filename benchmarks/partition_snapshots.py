"""Benchmark: replacing one partition (a partition snapshot) against replacing the whole table.

    uv run --group bench python benchmarks/partition_snapshots.py [--rows N]

On a private lake (temporary LAKE_HOME, its embedded S3 server and Sail), two copies of the
`insurance` declaration partitioned by `state_code`:

- `by_state`: its snapshot source declares `partition: state_code`, one object per state
  (`state_code=CA/...csv`). It loads every state, then one state's object again with 1 % of that
  state's policies gone and 1 % changed;
- `whole` (the baseline): the same rows as one full load, then the whole table again with the
  same policies gone and changed (what a source that cannot export one partition sends).

Both go through `apply_pending` (the change core: feed, tombstones and history included). The
script prints each run's wall time, the rows after, and the ratios of the partition's runs to
the baseline's.
"""

import argparse
import io
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from policy_data import FIRST_KEY, policies  # noqa: E402
from private_lake import private_lake, storage_and_engine  # noqa: E402

#: The state whose object is loaded again.
RELOADED = "CA"


def _csv(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=True, quoting_style="none"))
    return sink.getvalue()


def _changed(table: pa.Table) -> pa.Table:
    """`table` with 1 % of RELOADED's policies gone and 1 % insured for one more."""
    state = pc.equal(table["state_code"], RELOADED)
    positions = np.flatnonzero(state.to_numpy(zero_copy_only=False))
    gone, changed = positions[::100], positions[1::100]
    keep = np.ones(table.num_rows, bool)
    keep[gone] = False
    values = table["insured_value"].to_numpy().copy()
    values[changed] += 1
    table = table.set_column(table.schema.get_field_index("insured_value"), "insured_value", pa.array(values))
    return table.filter(pa.array(keep))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    rows = policies(np.random.default_rng(42), np.arange(FIRST_KEY, FIRST_KEY + args.rows, dtype=np.int64))
    states = sorted(set(rows["state_code"].to_pylist()))
    again = _changed(rows)
    with private_lake("partition-snapshots-") as (_home, server):
        from lake_assets.core.apply.run import apply_pending
        from lake_assets.core.declaration import load_declaration
        from lake_assets.core.registry import declaration

        storage, spark = storage_and_engine(server.endpoint)
        declared = declaration("insurance").model_dump(mode="json")

        def copy(name: str, partitioned: bool) -> Any:
            snapshot = {"prefix": f"raw/{name}/fullload/", "kind": "snapshot"}
            if partitioned:
                snapshot["partition"] = "state_code"
            return load_declaration({**declared, "name": name, "partition_by": ["state_code"],
                                     "sources": [snapshot]}, name)

        def run(table: Any, label: str) -> float:
            started = time.perf_counter()
            report = apply_pending(table, storage, spark, f"{table.name}-{label}")
            seconds = time.perf_counter() - started
            print(f"  {label}: {seconds:.2f} s (rows after: {report.rows_after:,}; "
                  f"deleted {report.total('deleted'):,}, updated {report.total('updated'):,})")
            return seconds

        by_state, whole = copy("by_state", True), copy("whole", False)
        print(f"by_state: {len(states)} objects, one per state, {args.rows:,} rows")
        for state in states:
            chosen = rows.filter(pc.equal(rows["state_code"], state))
            storage.put_bytes(f"raw/by_state/fullload/state_code={state}/20260101-000000000.csv", _csv(chosen))
        first = run(by_state, "first load")
        storage.put_bytes(f"raw/by_state/fullload/state_code={RELOADED}/20260102-000000000.csv",
                          _csv(again.filter(pc.equal(again["state_code"], RELOADED))))
        reload = run(by_state, f"{RELOADED} again")
        print(f"whole: one full load of {args.rows:,} rows")
        storage.put_bytes("raw/whole/fullload/20260101-000000000.csv", _csv(rows))
        first_whole = run(whole, "first load")
        storage.put_bytes("raw/whole/fullload/20260102-000000000.csv", _csv(again))
        reload_whole = run(whole, "the whole table again")
        print(f"by_state / whole: first load {first / first_whole:.2f}x, "
              f"one state again against the whole table again {reload / reload_whole:.2f}x")


if __name__ == "__main__":
    main()
