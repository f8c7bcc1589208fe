"""Timers around the insurance pipeline's steps while a benchmark runs ours (nested steps
count in both): `time_phases()` wraps them and returns the totals it fills in,
`restore_phases()` unwraps them."""

import functools
import importlib
import time

#: (module, function, phase): timers around the pipeline's steps while ours runs.
PHASES = [
    ("lake_assets.resources.storage", "LakeStorage.get_bytes", "S3 GET raw"),
    ("lake_assets.insurance.pipeline", "parse_csv", "parse"),
    ("lake_assets.insurance.pipeline", "validate", "validate"),
    ("lake_assets.insurance.pipeline", "_current_sequences", "table keys"),
    ("lake_assets.insurance.pipeline", "_events", "sequence"),
    ("lake_assets.insurance.pipeline", "resolve", "latest per key"),
    ("lake_assets.insurance.pipeline", "_with_audit", "audit columns"),
    ("lake_assets.insurance.merge", "stage", "staging (Parquet + PUT)"),
    ("lake_assets.resources.storage", "LakeStorage.put_bytes", "S3 PUT"),
    ("lake_assets.insurance.pipeline", "_commit", "engine commit"),
    ("lake_assets.insurance.pipeline", "_record_tombstones", "tombstones"),
    ("lake_assets.insurance.pipeline", "_history_changes", "history rows"),
    ("lake_assets.core.scd2", "record", "history write"),
    ("lake_assets.insurance.pipeline", "_table_rows", "table rows read (keys; the feed's old rows)"),
    ("lake_assets.core.change_feed", "write_version", "change feed (the run's commit, from its rows)"),
    ("lake_assets.insurance.changes", "catch_up", "change feed (from the log)"),
    ("lake_assets.core.ledger", "Ledger.record", "ledger"),
]
_originals: list[tuple[object, str, object]] = []


def time_phases() -> dict[str, float]:
    totals: dict[str, float] = {}
    for module_name, path, phase in PHASES:
        owner = importlib.import_module(module_name)
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        if not hasattr(owner, name):
            continue
        original = getattr(owner, name)
        _originals.append((owner, name, original))
        totals[phase] = 0.0

        def timed(*args, __original=original, __phase=phase, **kwargs):
            started = time.perf_counter()
            try:
                return __original(*args, **kwargs)
            finally:
                totals[__phase] += time.perf_counter() - started
        setattr(owner, name, functools.wraps(original)(timed))
    return totals


def restore_phases() -> None:
    while _originals:
        owner, name, original = _originals.pop()
        setattr(owner, name, original)
