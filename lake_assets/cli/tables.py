"""`lake table ...`: declare a table in one file, check every declaration, list them."""

from pathlib import Path
from typing import Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import Format, console, render
from lake_assets.core.source_kind import SourceKind
from lake_assets.core.errors import UsageError
from lake_assets.core.tables import TableFormat

table_app = typer.Typer(help="Declared tables: scaffold one from a sample CSV, check them, list them.",
                        no_args_is_help=True)
app.add_typer(table_app, name="table")


@table_app.command()
@friendly
def add(
    name: Annotated[str, typer.Argument(help="the table's name (lower-case letters, digits, _)")],
    sample: Annotated[Path, typer.Option("--sample", help="a sample CSV of the table's raw files")],
    kind: Annotated[SourceKind | None, typer.Option(help="what the sample is (default: read from it)")] = None,
    table_format: Annotated[TableFormat, typer.Option("--format", help="keep the table as Delta, or as Iceberg in "
                                                      "the catalog")] = TableFormat.DELTA,
) -> None:
    """Write a declaration for NAME, guessed from a sample CSV: columns and types, the key (marked
    for review), a full-load and a CDC raw zone; then check it against the other declarations.

    The file lands in LAKE_TABLES_DIR (or next to the code location); the next `lake dev` or
    `lake run` builds the table, its checks, sensor and job from it."""
    from lake_assets.core import registry, scaffold

    if not sample.is_file():
        raise FileNotFoundError(f"no such file: {sample}")
    target = registry.tables_dir() / f"{name}.yaml"
    if target.exists():
        raise UsageError(f"{target} exists: edit it, or choose another name")
    try:
        guess = scaffold.guess(sample.read_bytes(), kind)
    except ValueError as error:
        raise UsageError(f"{sample}: {error}") from None
    text = scaffold.render(name, guess, str(sample), table_format.value)
    declared = registry.check_together([*((p, registry.read_file(p)) for p in registry.files()),
                                        (target, registry.parse(text, str(target)))])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    table = declared[-1]
    console.print(f"wrote {target}: {len(table.columns)} columns, key {', '.join(table.keys)} (review it), "
                  f"raw zones {', '.join(s.prefix for s in table.sources)}")
    console.print(f"next: lake put {sample} --to {name}:{guess.kind.value}, then lake run "
                  "(or lake dev; restart a running lake dev to load the new table)")


@table_app.command()
@friendly
def check() -> None:
    """Check every declaration (fields, columns, keys, options, expectations; names and raw zones
    against each other), the TPC-DS star's too: one line per table, or the first mistake in one line (exit 2)."""
    from lake_assets.core import registry

    for table in registry.declarations():
        console.print(f"ok: {table.name} ({len(table.columns)} columns, key {', '.join(table.keys)})")
    for table in registry.star_declarations().values():
        console.print(f"ok: {table.group}.{table.name} ({len(table.columns)} columns, key {', '.join(table.keys)}; "
                      "the TPC-DS star's)")


@table_app.command("list")
@friendly
def list_tables(fmt: Annotated[Format, typer.Option("--format")] = Format.table) -> None:
    """The declared tables: name, group, key, partition columns, raw zones, history and feed, what
    applies them (the change core; the TPC-DS star's tables, declared the same way: its dimensions the
    change core too, web_sales the star's own loader) and the file declaring each."""
    from lake_assets.core import registry
    from lake_assets.core.tables import TPCDS_ON_CORE

    declared = [(table, path, "change core") for path, table in
                ((p, registry.read_file(p)) for p in registry.files())]
    on_core = {t.name for t in TPCDS_ON_CORE}
    star = [(table, registry.STAR_TABLES_DIR / f"{name}.yaml",
             "change core" if table.table_name in on_core else "TPC-DS star loader")
            for name, table in registry.star_declarations().items()]
    registry.declarations()  # checked against each other first: a mistake is the command's one line
    rows = [(table.name, table.group, table.format.value, ", ".join(table.keys), ", ".join(table.partition_by) or "none",
             ", ".join(f"{s.prefix} ({s.kind.value})" for s in table.sources),
             "yes" if table.history else "no", "yes" if table.change_feed else "no", applied_by, str(path))
            for table, path, applied_by in [*declared, *star]]
    render(["table", "group", "format", "key", "partitioned by", "raw zones", "history", "feed", "applied by",
            "declared in"], rows, fmt, title="declared tables")

