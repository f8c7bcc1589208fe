"""`lake put` and `lake status`: the raw zone."""

from pathlib import Path
from typing import Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import Format, console, render
from lake_assets.cli.session import lake_session
from lake_assets.core.errors import UsageError
from lake_assets.core.ledger import APPROVED, HELD, REVERTED, Ledger
from lake_assets.core.raw_zone import IGNORED, ignored_objects, list_raw
from lake_assets.insurance.contract import TABLE
from lake_assets.insurance.raw_zone import RAW_CDC, RAW_FULLLOAD, raw_objects
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.schema import RAW

ZONES = {"fullload": RAW_FULLLOAD, "cdcload": RAW_CDC}


@app.command()
@friendly
def put(
    file: Annotated[Path, typer.Argument(help="local CSV file to upload")],
    to: Annotated[str, typer.Option("--to", help="raw zone: fullload or cdcload")],
) -> None:
    """Upload FILE into the raw zone under its own name (the same name again re-delivers it)."""
    if to not in ZONES:
        raise UsageError(f"--to must be one of {', '.join(ZONES)}, not {to!r}")
    if not file.is_file():
        raise FileNotFoundError(f"no such file: {file}")
    with lake_session() as lake:
        key = ZONES[to] + file.name
        etag = lake.storage.put_bytes(key, file.read_bytes())
        console.print(f"put {lake.storage.uri(key)} (etag {etag})")


@app.command()
@friendly
def status(fmt: Annotated[Format, typer.Option("--format")] = Format.table) -> None:
    """What is pending, applied, rejected and held in the raw zone, per file, and why."""
    with lake_session() as lake:
        ledger = Ledger(lake.storage).latest_by_table()
        latest = ledger.get(TABLE, {})
        rows: list[tuple] = []
        for obj in raw_objects(lake.storage):
            entry = latest.get((obj.key, obj.etag))
            if entry is None:
                redelivered = any(key == obj.key for key, _ in latest)
                rows.append((obj.key, obj.size, "pending (re-delivered)" if redelivered else "pending",
                             None, None, None, None, None, None))
            else:
                detail = entry["detail"]
                if entry["status"] == HELD:
                    detail = f"{detail}; publish it with `lake approve {obj.key}`"
                elif entry["status"] == APPROVED:
                    detail = f"{detail}; published by the next run"
                elif entry["status"] == REVERTED:
                    detail = f"{detail}; apply it again with `lake run --reapply`"
                rows.append((obj.key, obj.size, entry["status"], entry["table_version"], entry["rows_in_file"],
                             entry["rows_applied"], entry["rows_superseded"], entry["rows_quarantined"], detail))
        rows += [(o["Key"], int(o["Size"]), IGNORED, None, None, None, None, None, "not a .csv file: never applied")
                 for o in ignored_objects(lake.storage, list(ZONES.values()))]
        rows.extend(_tpcds_rows(lake.storage, ledger))
        render(["file", "bytes", "status", "version", "rows", "applied", "superseded", "quarantined", "detail"],
               rows, fmt, title=f"raw zone of s3://{lake.storage.bucket}")


def _tpcds_rows(storage: LakeStorage, ledger: dict[str, dict[tuple[str, str], dict]]) -> list[tuple]:
    """Status rows of the TPC-DS raw objects, against the ledger of the table each one feeds."""
    rows = []
    for obj in list_raw(storage, RAW.root):
        name = RAW.table_of(obj.key)
        if name is None:
            continue
        latest = ledger.get(name, {})
        entry = latest.get((obj.key, obj.etag))
        if entry is None:
            redelivered = any(key == obj.key for key, _ in latest)
            rows.append((obj.key, obj.size, "pending (re-delivered)" if redelivered else "pending",
                         None, None, None, None, None, None))
        else:
            rows.append((obj.key, obj.size, entry["status"], entry["table_version"], entry["rows_in_file"],
                         entry["rows_applied"], entry["rows_superseded"], entry["rows_quarantined"],
                         entry.get("detail")))
    return rows

