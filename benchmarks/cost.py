"""Issue 7's cost benchmark in one command: every figure of the cost table, in one run.

    uv run python benchmarks/cost.py [--quick] [--json results.json]

Runs, one after the other on the same generated data (same generator, same seed):
CDC batches of 1k/10k/100k/1M rows into a 10M-row table (ours through the Dagster asset
vs the bare-engine MERGE), the 10M-row full load (vs the bare engine), freshness over 20
files under `lake dev`, the sensor tick at 1k/10k/100k applied files, and the CLI
latencies. Prints one Markdown table (the README pastes it) and saves a plot of time
against batch size to benchmarks/results/cdc_batches.png. `--quick` uses small sizes
(a smoke run of the whole harness; its figures say nothing about the targets).
"""

import argparse
import json
import platform
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from figures import Figure, render  # noqa: E402

PLOT = HERE / "results" / "cdc_batches.png"


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    return f"{platform.machine()}, {os.cpu_count()} cores, {memory:.0f} GiB, Python {platform.python_version()}"


def plot(figures: list[Figure], path: Path) -> None:
    """Time against CDC batch size, ours and the bare-engine MERGE, on log-log axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = sorted((f for f in figures if f.rows), key=lambda f: f.rows)
    if not batches:
        return
    sizes = [f.rows for f in batches]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    ax.plot(sizes, [f.seconds for f in batches], "o-", label="lake (through the Dagster asset)")
    if all(f.baseline_seconds for f in batches):
        ax.plot(sizes, [f.baseline_seconds for f in batches], "s--", label=batches[0].baseline or "baseline")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("CDC batch size (rows) into the 10M-row table")
    ax.set_ylabel("seconds (log)")
    ax.set_title("Cost follows the batch, not the table")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of the harness")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--plot-from", type=Path, help="only draw the plot from a JSON written by --json")
    args = parser.parse_args()
    if args.plot_from:
        saved = json.loads(args.plot_from.read_text())["figures"]
        fields = set(Figure.__dataclass_fields__)
        plot([Figure(**{k: v for k, v in f.items() if k in fields}) for f in saved], PLOT)
        print(f"plot: {PLOT.relative_to(HERE.parent)}")
        return

    import cdc_batches
    import cli_latency
    import freshness
    import full_load
    import sensor_tick

    figures: list[Figure] = []
    for name, module in (("CDC batches", cdc_batches), ("full load", full_load), ("freshness", freshness),
                         ("sensor tick", sensor_tick), ("CLI latency", cli_latency)):
        print(f"== {name}", flush=True)
        measured = module.measure(quick=args.quick)
        print(render(measured), flush=True)
        figures += measured
    print(f"\nmachine: {machine()}{' (quick sizes)' if args.quick else ''}\n")
    print(render(figures))
    plot(figures, PLOT)
    print(f"\nplot: {PLOT.relative_to(HERE.parent)}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "quick": args.quick,
                                         "figures": [f.as_dict() for f in figures]}, indent=2))


if __name__ == "__main__":
    main()
