"""The business zone: BI reports over the web_sales star, one SQL file each.

Every report is plain SQL over `lake.tpcds.<table>` (the star's tables qualified in their
catalog, core/tables.py) that runs unchanged on Sail and JVM Spark (Spark SQL), on DuckDB over
the Iceberg tables (the catalog attached as `lake`), and on DuckDB over the raw files (the
tests' oracle, views in a database named `lake`: tpcds/raw_duckdb.py).
TPC-DS queries are DuckDB's `tpcds_queries()` texts with the Spark adjustments each file's
first line notes: explicit NULLS FIRST/LAST where the engines' defaults differ, plain
identifiers for double-quoted aliases. The first line (a `--` comment) describes the report.
"""

from dataclasses import dataclass
from importlib import resources

from lake_assets.core.tables import ICEBERG_CATALOG

REPORT_PREFIX = "report_"
NAMESPACE = "tpcds"


@dataclass(frozen=True)
class Report:
    name: str  # file stem: q12, sales_by_hour, ...
    description: str
    sql: str  # without the trailing semicolon

    @property
    def table(self) -> str:
        """The Iceberg table the report is materialised in, by its registry name (`tpcds.report_q12`)."""
        return f"{NAMESPACE}.{REPORT_PREFIX}{self.name}"

    @property
    def engine_table(self) -> str:
        """That table in the engine's SQL, qualified in its catalog (`lake.tpcds.report_q12`)."""
        return f"{ICEBERG_CATALOG}.{self.table}"


def _load(name: str, text: str) -> Report:
    first, _, _ = text.partition("\n")
    description = first.removeprefix("--").strip() if first.startswith("--") else name
    return Report(name=name, description=description, sql=text.strip().rstrip(";").strip())


def load_reports() -> tuple[Report, ...]:
    files = sorted((f for f in resources.files(__package__).iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return tuple(_load(f.name.removesuffix(".sql"), f.read_text()) for f in files)


REPORTS: tuple[Report, ...] = load_reports()
REPORTS_BY_NAME: dict[str, Report] = {r.name: r for r in REPORTS}
