"""Timers around the change core's steps while a benchmark runs ours (nested steps count in
both): `time_phases()` wraps them and returns the totals it fills in, `restore_phases()`
unwraps them. Each step submits its work to the engine and waits for it, so a step's time is
the engine's work for it plus the round trip."""

import functools
import importlib
import time

#: (module, function, phase): timers around the core's steps (core/apply/run.py) while ours runs.
PHASES = [
    ("lake_assets.core.apply.run", "read_objects", "read plan (engine: fetch, parse, validate run inside the stage write)"),
    ("lake_assets.core.apply.stage", "Stage.write", "engine: read + stage (parsed), resolve + stage (resolved)"),
    ("lake_assets.core.apply.bookkeeping", "quarantine", "quarantine"),
    ("lake_assets.core.apply.run", "_guard", "snapshot guard"),
    ("lake_assets.core.apply.commit", "choose", "commit strategy (key ranges)"),
    ("lake_assets.core.apply.commit", "commit", "table commit"),
    ("lake_assets.core.apply.feed", "write_version", "change feed (the run's commit)"),
    ("lake_assets.core.apply.feed", "catch_up", "change feed (from the log)"),
    ("lake_assets.core.apply.bookkeeping", "record_tombstones", "tombstones"),
    ("lake_assets.core.apply.history", "record", "SCD2 history"),
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
