"""Generated policy data and a peak-RSS sampler, shared by the insurance benchmarks."""

import io
import os
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

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


class RssSampler:
    """Highest current RSS of this process seen while a phase runs (ru_maxrss only ever grows)."""

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


def _choice(rng: np.random.Generator, values: list[str], n: int) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, len(values), n, dtype=np.int32)),
                                          pa.array(values)).cast(pa.string())


def policies(rng: np.random.Generator, keys: np.ndarray) -> pa.Table:
    """Policy rows for `keys`, in the contract's data columns."""
    n = len(keys)
    codes = list(STATES)
    state = rng.integers(0, len(codes), n)
    pairs = [c for s in codes for c in STATES[s][1]]
    offsets = np.cumsum([0] + [len(STATES[s][1]) for s in codes])[:-1]
    counts = np.array([len(STATES[s][1]) for s in codes])
    city = offsets[state] + (rng.integers(0, 1 << 30, n) % counts[state])
    expiry = (np.datetime64("2025-01-01") + rng.integers(0, 3 * 365, n).astype("timedelta64[D]")).astype("datetime64[D]")
    return pa.table({
        "policy_id": pa.array(keys.astype(np.int32)),
        "expiry_date": pa.array(expiry).cast(pa.string()),
        "location_name": pa.array(pairs).take(pa.array(city)),
        "state_code": pa.array(codes).take(pa.array(state)),
        "region_name": pa.array([STATES[s][0] for s in codes]).take(pa.array(state)),
        "insured_value": pa.array(rng.integers(10_000, 5_000_000, n, dtype=np.int32)),
        "business_type": _choice(rng, BUSINESS_TYPES, n),
        "earthquake_coverage": _choice(rng, ["Y", "N"], n),
        "flood_coverage": _choice(rng, ["Y", "N"], n),
    })


def full_load_csv(rows: int, seed: int = 42) -> bytes:
    """A full-load CSV (with header) of `rows` policies, keys FIRST_KEY up."""
    rng = np.random.default_rng(seed)
    table = policies(rng, np.arange(FIRST_KEY, FIRST_KEY + rows, dtype=np.int64))
    sink = io.BytesIO()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=True, quoting_style="none"))
    return sink.getvalue()


#: Dagster's console log quiet while a benchmark runs the job.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def run_apply_job(definitions) -> tuple[dict, float, float]:  # dg.Definitions
    """Run `apply_insurance` in process with its checks: (the insurance materialization's
    metadata, wall seconds, peak RSS GiB). Exits when a check fails."""
    import dagster as dg

    job = definitions.resolve_job_def("apply_insurance")
    with RssSampler() as rss:
        started = time.perf_counter()
        result = job.execute_in_process(run_config=QUIET, instance=dg.DagsterInstance.ephemeral(), raise_on_error=True)
        wall = time.perf_counter() - started
    metadata = next(e.materialization.metadata for e in result.get_asset_materialization_events()
                    if e.materialization.asset_key.to_user_string() == "insurance")
    failed = [e.event_specific_data.check_name for e in result.all_events
              if e.event_type_value == "ASSET_CHECK_EVALUATION" and not e.event_specific_data.passed]
    if failed:
        raise SystemExit(f"asset checks failed: {failed}")
    return metadata, wall, rss.peak_gib


def seed_columns() -> list[tuple[str, str]]:
    """(name, Spark SQL type) of the seed's columns: insurance's first contract version, as declared."""
    from lake_assets.core.registry import declaration

    return [(c.name, c.type) for c in declaration("insurance").contracts[0].columns]
