"""`lake backfill` of a declared table: its newest applied snapshots loaded again in ONE run of its
job, each as of the stamp it was applied with (core/apply/run.py `reload`): per partition for a
source of partition snapshots (all, some, or a range of values), else the table's newest full load.
A newer change of a key wins over them, so a backfill brings back what the table lost (a row deleted
by another writer of the table) and undoes no change made since."""

import contextlib
import datetime as dt
from typing import Any

from lake_assets.cli.job_runner import execute, report_run
from lake_assets.cli.output import console
from lake_assets.cli.session import LakeSession
from lake_assets.core.apply.partitions import partition_text, partition_value
from lake_assets.core.apply.plan import RawFile, applied_snapshots
from lake_assets.core.declaration import DayValues, TableDeclaration
from lake_assets.core.errors import UsageError
from lake_assets.core.registry import declarations
from lake_assets.core.tables import table_set
from lake_assets.declared.jobs import job_name


def backfilled(name: str, star: str) -> TableDeclaration:
    """The declared table `name` (its name, or `<group>.<name>` as an Iceberg table is queried)."""
    for declared in declarations():
        if name in (declared.name, table_set(declared).table.name):
            return declared
    raise UsageError(f"{name} is neither {star} nor a declared table "
                     f"(declared: {', '.join(d.name for d in declarations())})")


def reloaded(lake: LakeSession, declaration: TableDeclaration, start: str | None, end: str | None,
             values: list[str]) -> list[RawFile]:
    """The objects a backfill of `declaration` loads again: raises UsageError when none, or when the
    partitions asked for are not the table's."""
    column = declaration.partition_snapshots
    if column is None and (start or end or values):
        raise UsageError(f"{declaration.name}'s snapshots are of the whole table: `lake backfill {declaration.name}` "
                         "loads its newest full load again (--from, --to and --partition are for a source of "
                         "partition snapshots)")
    found = applied_snapshots(declaration, lake.storage)
    if column is not None:
        found = _chosen(declaration, column, found, start, end, values)
    objects = sorted((f for files in found.values() for f in files), key=lambda f: f.key)
    if not objects:
        raise UsageError(f"{declaration.name}: no applied snapshot to load again"
                         + (" in the partitions asked for" if column and (start or end or values) else ""))
    return objects


def _chosen(declaration: TableDeclaration, column: str, found: dict[Any, list[RawFile]], start: str | None,
            end: str | None, values: list[str]) -> dict[Any, list[RawFile]]:
    """The partitions of `found` a backfill asks for: `values`, or those from `start` to `end`
    (inclusive, either open), or every one."""
    def typed(text: str, option: str) -> Any:
        daily = declaration.daily_partitions
        if daily is not None and daily.values is DayValues.JULIAN_DAY:  # a day as its date, too
            with contextlib.suppress(ValueError):
                return daily.value(dt.date.fromisoformat(text))
        try:
            return partition_value(declaration, column, text)
        except ValueError as error:
            raise UsageError(f"{option}: {error}") from None

    if values and (start or end):
        raise UsageError("--partition names partitions one by one; --from and --to a range: use one or the other")
    if values:
        wanted = [typed(v, "--partition") for v in values]
        missing = [v for v, value in zip(values, wanted) if value not in found]
        if missing:
            raise UsageError(f"{declaration.name}: no applied snapshot of {column}={', '.join(missing)} "
                             f"(partitions with one: {_listed(found)})")
        return {value: found[value] for value in wanted}
    low = typed(start, "--from") if start else None
    high = typed(end, "--to") if end else None
    if low is not None and high is not None and low > high:
        raise UsageError(f"--from {start} is after --to {end}")
    if low is None and high is None:
        return found
    return {value: files for value, files in found.items() if value is not None
            and (low is None or value >= low) and (high is None or value <= high)}


def _listed(found: dict[Any, list[RawFile]], most: int = 5) -> str:
    texts = sorted(partition_text(v) for v in found)
    return ", ".join(texts[:most]) + (f", ... ({len(texts)})" if len(texts) > most else "") if texts else "none"


def run_backfill(lake: LakeSession, declaration: TableDeclaration, objects: list[RawFile]) -> int:
    """Load `objects` again in one run of the table's job; the exit code of its report."""
    console.print(f"{declaration.name}: loading {len(objects)} object(s) again, each as of its own stamp: "
                  + ", ".join(o.key.removeprefix(o.key.rsplit("/", 2)[0] + "/") for o in objects[:5])
                  + (", ..." if len(objects) > 5 else ""))
    config = {"ops": {f"{declaration.name}_tables": {"config": {"reload": [o.key for o in objects]}}}}
    return report_run(execute(lake, job_name(declaration), "lake backfill", config=config))
