"""One measured figure of a benchmark, and the table every benchmark prints.

Each cost benchmark module (`cdc_batches.py`, `full_load.py`, `freshness.py`,
`sensor_tick.py`, `cli_latency.py`) exposes `measure(...) -> list[Figure]` and runs on its
own with `uv run python benchmarks/<module>.py`; `benchmarks/cost.py` runs them all in one
process, on the same data, and prints one table.
"""

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Figure:
    work: str  # what was measured, e.g. "CDC 1,000 rows into 10M"
    seconds: float  # ours: the median (or the p50) of the measured repetitions
    baseline_seconds: float | None = None  # the baseline measured in the same run, if any
    baseline: str = ""  # what the baseline is, e.g. "bare-engine MERGE"
    peak_gib: float | None = None  # peak RSS while measuring, if measured
    target: str = ""  # the target, e.g. "<= 1.5 s and <= 0.05x baseline"
    met: bool | None = None  # whether the target is met
    note: str = ""  # breakdown or anything a reader needs (p95, max, ...)
    rows: int | None = None  # the size of the work in rows (a CDC batch), for the plot
    unit: str = "s"  # what `seconds` and `baseline_seconds` count, when not seconds (e.g. "MiB")

    @property
    def ratio(self) -> float | None:
        return self.seconds / self.baseline_seconds if self.baseline_seconds else None

    def as_dict(self) -> dict:
        return asdict(self) | {"ratio": self.ratio}


def render(figures: list[Figure]) -> str:
    """A Markdown table of the figures (the README pastes it as is)."""
    lines = ["| work | ours | baseline | ratio | peak GiB | target | met | note |",
             "|---|---|---|---|---|---|---|---|"]
    for f in figures:
        base = f"{f.baseline_seconds:.2f} {f.unit} ({f.baseline})" if f.baseline_seconds else ""
        ratio = f"{f.ratio:.2f}x" if f.ratio else ""
        peak = f"{f.peak_gib:.2f}" if f.peak_gib is not None else ""
        met = "" if f.met is None else ("yes" if f.met else "**no**")
        lines.append(f"| {f.work} | {f.seconds:.2f} {f.unit} | {base} | {ratio} | {peak} | {f.target} | {met} | {f.note} |")
    return "\n".join(lines)
