"""A bounded soak: shuffled CDC deliveries, concurrent `lake run`s, kill -9 of runs and of the
embedded S3 server, then the table against a model (benchmarks/soak.py does the work; run it
longer there). Zero lost, zero duplicated, every raw row accounted for."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parents[1] / "benchmarks" / "soak.py"


def _soak_module():
    spec = importlib.util.spec_from_file_location("lake_soak", SOAK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_model_of_the_soak_applies_changes_in_sequence_order() -> None:
    """The soak's own oracle, on a hand-checked case (so a wrong model cannot pass silently)."""
    soak = _soak_module()
    late = soak.Delivery("20250101-090100000.csv", "", [(1, "D", None), (2, "U", 20)], 2)
    early = soak.Delivery("20250101-090000000.csv", "", [(1, "U", 10), (3, "I", 30)], 2)
    assert soak.model({1: 1, 2: 2}, [late, early]) == {2: 20, 3: 30}


@pytest.mark.e2e
def test_soak_under_concurrent_runs_and_kills() -> None:
    """The benchmark itself, as a user runs it (its own process, server and credentials)."""
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    result = subprocess.run([sys.executable, str(SOAK), "--seconds", "60", "--seed", "11"], env=env,
                            capture_output=True, text=True, timeout=1500)
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "zero lost, zero duplicated, every raw row accounted for" in result.stdout
