"""`lake put` and `lake rm`: the raw zone (`lake status` is in cli/status.py).

The libraries a command uses are imported when it runs, so `lake` starts quickly.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import console, errors
from lake_assets.cli.session import lake_session
from lake_assets.core.errors import LakeError, UsageError

if TYPE_CHECKING:
    from lake_assets.core.declaration import TableDeclaration
    from lake_assets.core.dms import DmsLayout
    from lake_assets.resources.storage import LakeStorage

#: The seed's names for insurance's two zones (`lake put --to fullload`, `lake demo`): table, source kind.
ZONES = {"fullload": ("insurance", "snapshot"), "cdcload": ("insurance", "cdc")}


def _tables() -> list[TableDeclaration]:
    """Every table whose raw zone `lake put` and `lake rm` serve: the declared ones, then the TPC-DS star's."""
    from lake_assets.core.registry import declarations, star_declarations

    return [*declarations(), *star_declarations().values()]


def zone_prefix(to: str) -> tuple[TableDeclaration, str]:
    """The declared table and raw prefix `--to` names: `TABLE:cdc` or `TABLE:snapshot` (a table with
    one source: `TABLE`), a raw prefix, or the seed's `fullload` / `cdcload` (insurance's)."""
    name, _, kind = to.partition(":")
    if to in ZONES:
        name, kind = ZONES[to]
    for table in _tables():
        for source in table.sources:
            if to == source.prefix or (table.name == name and kind in (source.kind.value, "")
                                       and (kind or len(table.sources) == 1)):
                return table, source.prefix
    choices = ", ".join([*ZONES, *(f"{t.name}:{s.kind.value}" for t in _tables() for s in t.sources)])
    raise UsageError(f"--to must name a table's raw zone: one of {choices} (or its prefix), not {to!r}")


def _warning(storage: LakeStorage, table: TableDeclaration, key: str, dms: DmsLayout) -> str | None:
    """Why the run that applies the object put at `key` will ignore or refuse it, or None. The star's
    web_sales is still applied by its own loader (tpcds/load.py, tpcds/corrections.py), whose rules
    differ from the core's: its day objects by their place (tpcds/layout.py), any correction name
    (one without a DMS time is sequenced by arrival)."""
    import datetime as dt

    from lake_assets.core.apply.intake import refusal
    from lake_assets.tpcds.layout import refusal_if_put
    from lake_assets.tpcds.schema import DECLARATIONS, RAW, TpcdsTable

    if table.table_name == DECLARATIONS[TpcdsTable.WEB_SALES].table_name:
        return refusal_if_put(storage, key) if key.startswith(RAW.facts) else None
    return refusal(table, key, dms, dt.datetime.now(dt.timezone.utc))


@app.command()
@friendly
def put(
    file: Annotated[Path, typer.Argument(help="local CSV file to upload")],
    to: Annotated[str, typer.Option("--to", help="raw zone: TABLE:cdc or TABLE:snapshot (see `lake table list`; "
                                                 "the TPC-DS star's too: web_sales:snapshot, item:cdc, ...), "
                                                 "or insurance's fullload / cdcload")],
    name: Annotated[str | None, typer.Option("--as", help="name in the zone (default: the file's own; "
                                                          "folders allowed, e.g. 2024/04/01/x.csv)")] = None,
) -> None:
    """Upload FILE into the raw zone under its own name or NAME (the same name again re-delivers it).

    Warns at once (stderr, exit 0: the upload still happens) when the pipeline will ignore
    or refuse the file by its name, and says which name to use instead.
    """
    if not file.is_file():
        raise FileNotFoundError(f"no such file: {file}")
    name = file.name if name is None else name
    if not name or name.startswith("/") or name.endswith("/") or ".." in name.split("/"):
        raise UsageError(f"--as must be a file name below the zone (folders allowed), not {name!r}")
    with lake_session() as lake:
        table, prefix = zone_prefix(to)
        key = prefix + name
        warning = _warning(lake.storage, table, key, lake.settings.rules.dms())
        if warning is not None:
            errors.print(f"warning: {warning}", markup=False, highlight=False)
        etag = lake.storage.put_bytes(key, file.read_bytes())
        console.print(f"put {lake.storage.uri(key)} (etag {etag})")


@app.command()
@friendly
def rm(
    keys: Annotated[list[str], typer.Argument(help="raw objects: raw/cdcload/NAME, raw/fullload/NAME or s3:// URIs")],
    force: Annotated[bool, typer.Option("--force", help="remove applied files too (their rows stay in the table)")]
    = False,
) -> None:
    """Remove raw files that have not been applied (pending, refused or held) from the raw zone.

    An applied file is refused unless --force: removing it takes no row out of the table
    (`lake restore` does). The ledger keeps every file's entries as history; `lake status`
    lists what is in the raw zone, so a removed file leaves it. Done under the table's write
    lease, so no run is applying a file while it is removed.
    """
    with lake_session() as lake:
        wanted = [_raw_key(lake.storage, key) for key in keys]
        for table in {t.name: t for t, _ in wanted}.values():
            _remove(lake.storage, table, [key for t, key in wanted if t is table], force)


def _remove(storage: LakeStorage, table: TableDeclaration, wanted: list[str], force: bool) -> None:
    """Remove `table`'s raw objects `wanted` under its write lease (applied ones only with `force`)."""
    from lake_assets.core.ledger import APPLIED, Ledger
    from lake_assets.core.lock import LockOwner, table_lock

    client = storage.get_client()
    with table_lock(storage, table.table_name, LockOwner.current("lake rm")):
        found = {key: _etag(client, storage.bucket, key) for key in wanted}
        missing = [key for key, etag in found.items() if etag is None]
        if missing:
            raise LakeError(f"no such raw file: {', '.join(missing)} (see `lake status`)")
        latest = Ledger(storage).latest(table.table_name)
        applied = [key for key in wanted if latest.get((key, found[key]), {}).get("status") == APPLIED]
        if applied and not force:
            raise LakeError(f"{', '.join(applied)}: applied, its rows are in the table and stay there if the "
                            "file is removed; undo them with `lake restore`, or remove the file anyway with "
                            "--force")
        for key in wanted:
            client.delete_object(Bucket=storage.bucket, Key=key)
            kept = " (its rows stay in the table: `lake restore` undoes them)" if key in applied else ""
            console.print(f"removed {storage.uri(key)}{kept}")


def _etag(client, bucket: str, key: str) -> str | None:  # a boto3 S3 client
    """The ETag of the object at `key`, or None if there is none."""
    try:
        return client.head_object(Bucket=bucket, Key=key)["ETag"].strip('"')
    except client.exceptions.ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return None
        raise


def _raw_key(storage: LakeStorage, given: str) -> tuple[TableDeclaration, str]:
    """The declared table of a raw file, and its key, given as a key or an s3:// URI of this bucket."""
    key = given.removeprefix(f"s3://{storage.bucket}/")
    table = next((t for t in _tables() if t.source(key) is not None), None)
    if table is None or key.endswith("/"):
        prefixes = ", ".join(f"{s.prefix}NAME" for t in _tables() for s in t.sources)
        raise UsageError(f"{given!r} is not a declared table's raw file: give one of {prefixes}")
    return table, key
