"""The lake's declared tables: one YAML file per table (core/declaration.py says what it holds).

The tables the lake ships are declared in `lake_assets/tables/*.yaml`, next to the code location;
a team's own tables in the directory `LAKE_TABLES_DIR` names (`lake table add` writes there, or
into `lake_assets/tables/` when it is unset). The change core applies each one, and
`definitions.py` makes its assets, checks, sensor and job from the declaration alone.

Every file is checked when it is read: a mistake is one line naming the file, the field and what
it allows (`DeclarationError`), and so are two tables of one name or whose raw prefixes overlap.
"""

import functools
import os
from pathlib import Path

import yaml

from lake_assets.core.declaration import DeclarationError, TableDeclaration, load_declaration
from lake_assets.core.errors import UsageError
from lake_assets.core.tables import LakeTable, TableFormat, table_set

#: The tables the lake ships (the seed's insurance table), next to the code location.
BUILT_IN = Path(__file__).resolve().parent.parent / "tables"
#: The TPC-DS star's tables, declared the same way; the star's own loader (tpcds/) reads them.
STAR_TABLES_DIR = BUILT_IN / "tpcds"
#: A directory of a team's own declarations (one `<table>.yaml` each).
TABLES_DIR_VARIABLE = "LAKE_TABLES_DIR"
#: Table names the lake's own tables take (the TPC-DS star, the ledger), and the raw zone the TPC-DS star's.
RESERVED = ("lake_ledger", "tpcds")
RESERVED_PREFIX = "raw/tpcds/"
#: The first part of every raw source's asset key (`raw/insurance_cdc`): no Iceberg table's namespace.
RAW_ASSETS = "raw"


#: libyaml's safe loader where PyYAML was built with it (a tenth of the pure-Python one's time).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def tables_dir() -> Path:
    """Where `lake table add` writes a new declaration."""
    configured = os.environ.get(TABLES_DIR_VARIABLE)
    return Path(configured).expanduser() if configured else BUILT_IN


def read_file(path: Path) -> TableDeclaration:
    """The declaration in one YAML file (a mistake: one line naming the file and the field)."""
    try:
        text = path.read_text()
    except OSError as error:
        raise DeclarationError(f"{path}: cannot be read ({error.strerror})") from None
    return parse(text, str(path))


def parse(text: str, origin: str) -> TableDeclaration:
    """The declaration a YAML text holds (`origin` names it in a mistake's one line)."""
    try:
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise DeclarationError(f"{origin}: not YAML{where}: {getattr(error, 'problem', error)}") from None
    if not isinstance(data, dict):
        raise DeclarationError(f"{origin}: a declaration is a mapping of fields (name, columns, keys, sources, ...)")
    return load_declaration(data, origin)


def files() -> list[Path]:
    """Every declaration file: the built-in ones, then LAKE_TABLES_DIR's, each in name order."""
    found = sorted(BUILT_IN.glob("*.yaml"))
    configured = os.environ.get(TABLES_DIR_VARIABLE)
    if configured and Path(configured).expanduser().resolve() != BUILT_IN:
        found += sorted(Path(configured).expanduser().glob("*.yaml"))
    return found


@functools.cache
def declarations() -> tuple[TableDeclaration, ...]:
    """Every declared table, checked one by one and against each other."""
    return check_together([(path, read_file(path)) for path in files()])


@functools.cache
def star_declarations() -> dict[str, TableDeclaration]:
    """The TPC-DS star's tables by name, as their files declare them (their group is `tpcds`, their
    Iceberg tables `tpcds.<name>`)."""
    return {path.stem: read_file(path) for path in sorted(STAR_TABLES_DIR.glob("*.yaml"))}


def check_together(declared: list[tuple[Path, TableDeclaration]]) -> tuple[TableDeclaration, ...]:
    """The declarations, once no two share a name, a table kept beside them or a raw prefix, and
    none takes a reserved name or one of the TPC-DS star's tables."""
    names: dict[str, Path] = {}
    prefixes: dict[str, tuple[str, Path]] = {}
    kept = {t.name: (name, STAR_TABLES_DIR / f"{name}.yaml")
            for name, star in star_declarations().items() for t in table_set(star).kept(star)}
    for path, table in declared:
        if table.name in names:
            raise DeclarationError(f"{path}: table {table.name} is declared in {names[table.name]} too")
        if table.name in RESERVED or table.name.startswith("tpcds"):
            raise DeclarationError(f"{path}: name: {table.name} is the lake's own table's; choose another name")
        if table.name in star_declarations():
            raise DeclarationError(f"{path}: name: {table.name} is the TPC-DS star's table ({STAR_TABLES_DIR / table.name}"
                                   ".yaml); choose another name")
        for beside in table_set(table).kept(table):
            if beside.name in kept:
                other, where = kept[beside.name]
                raise DeclarationError(f"{path}: name: {table.name}: its table {beside.name} is one of table {other}'s "
                                       f"too ({where}); choose another name")
            kept[beside.name] = (table.name, path)
        if table.format is TableFormat.ICEBERG and table.group == "tpcds":
            raise DeclarationError(f"{path}: group: tpcds is the TPC-DS star's catalog namespace; an Iceberg table's "
                                   "group names its namespace: choose another group")
        if table.format is TableFormat.ICEBERG and table.group == RAW_ASSETS:
            raise DeclarationError(f"{path}: group: {RAW_ASSETS} holds the raw sources' assets ({RAW_ASSETS}/<table>_"
                                   "fullload, ...); an Iceberg table's asset is <group>/<name>: choose another group")
        names[table.name] = path
        for source in table.sources:
            if source.prefix.startswith(RESERVED_PREFIX) or RESERVED_PREFIX.startswith(source.prefix):
                raise DeclarationError(f"{path}: sources: {source.prefix} overlaps {RESERVED_PREFIX}, the TPC-DS "
                                       "star's raw zone")
            for prefix, (other, where) in prefixes.items():
                if source.prefix.startswith(prefix) or prefix.startswith(source.prefix):
                    raise DeclarationError(f"{path}: sources: {source.prefix} overlaps {prefix}, the raw prefix of "
                                           f"table {other} ({where}): each raw object feeds one table")
            prefixes[source.prefix] = (table.name, path)
    return tuple(table for _, table in declared)


def declaration(name: str) -> TableDeclaration:
    """The declaration of the table called `name`."""
    for declared in declarations():
        if declared.name == name:
            return declared
    known = ", ".join(d.name for d in declarations())
    raise UsageError(f"{name} is not a declared table; declared: {known} (see `lake table list`)")


def declared_by(table: LakeTable) -> TableDeclaration | None:
    """The declaration whose curated table is `table` (None: one of the lake's own)."""
    return next((d for d in declarations() if table_set(d).table.name == table.name), None)
