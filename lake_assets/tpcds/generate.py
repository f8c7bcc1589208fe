"""`lake tpcds generate`: real TPC-DS data from DuckDB's `dsdgen`, landed as the raw-zone contract.

DuckDB generates the star into a temporary database on disk, checks that no text value
would break the unquoted `|` format, and writes every object with `COPY ... PARTITION_BY`
into a temporary folder (the fact table never passes through Python). The files are then
uploaded in parallel with boto3 through `LakeStorage`. Scale 0.01 to 10 work; SF10 needs a
few GB of temporary disk.
"""

import concurrent.futures
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
from botocore.exceptions import BotoCoreError, ClientError

from lake_assets.resources.duckdb_reader import connect
from lake_assets.core.errors import LakeError, UsageError
from lake_assets.core.progress import SILENT, Progress
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds import raw_contract as contract

MIN_SCALE = 0.01
MAX_SCALE = 10.0
UPLOAD_THREADS = 16
#: DuckDB COPY options that write the contract's format.
COPY_OPTIONS = ("FORMAT csv, DELIMITER '|', HEADER false, QUOTE '', ESCAPE '', NULLSTR '', "
                "NEW_LINE '\\n'")


class RawContractViolation(LakeError):
    """Generated data that cannot be written in the raw-zone format without losing information."""


@dataclass
class GenerateResult:
    scale: float
    rows: dict[str, int] = field(default_factory=dict)  # per table, as dsdgen generated them
    null_date_rows: int = 0
    sold_dates: int = 0
    objects: int = 0
    bytes: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # dsdgen, write, upload


def generate(storage: LakeStorage, scale: float, workdir: Path | None = None,
             progress: Progress = SILENT) -> GenerateResult:
    """Generate TPC-DS at `scale` and land the star's raw objects in `storage`."""
    if not MIN_SCALE <= scale <= MAX_SCALE:
        raise UsageError(f"--scale must be between {MIN_SCALE} and {MAX_SCALE}, not {scale}")
    result = GenerateResult(scale=scale)
    with tempfile.TemporaryDirectory(prefix="lake-tpcds-", dir=workdir) as tmp:
        root = Path(tmp)
        con = connect(str(root / "dsdgen.duckdb"), "tpcds")
        try:
            con.execute(f"SET temp_directory = '{root / 'spill'}'")
            started = time.perf_counter()
            progress.step(f"dsdgen: generating TPC-DS at scale {scale:g}")
            con.execute(f"CALL dsdgen(sf={scale})")
            result.seconds["dsdgen"] = round(time.perf_counter() - started, 3)
            started = time.perf_counter()
            progress.step("writing the star's raw files (one per sold day)")
            write_raw_files(con, root / "out", result)
            result.seconds["write"] = round(time.perf_counter() - started, 3)
        finally:
            con.close()
        started = time.perf_counter()
        result.objects, result.bytes = upload_tree(storage, root / "out", progress=progress)
        result.seconds["upload"] = round(time.perf_counter() - started, 3)
    return result


def write_raw_files(con: duckdb.DuckDBPyConnection, out: Path, result: GenerateResult) -> None:
    """Write the contract's files under `out` (keys relative to the bucket) from dsdgen's tables."""
    for table in contract.STAR_TABLES:
        check_text_values(con, table)
        result.rows[table] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    for table in contract.DIMENSIONS:
        target = out / contract.dimension_key(table)
        target.parent.mkdir(parents=True, exist_ok=True)
        con.execute(f"COPY {table} TO '{target}' ({COPY_OPTIONS})")
    unknown = con.execute(
        "SELECT count(*) FROM web_sales LEFT JOIN date_dim ON ws_sold_date_sk = d_date_sk "
        "WHERE ws_sold_date_sk IS NOT NULL AND d_date IS NULL").fetchone()[0]
    if unknown:
        raise RawContractViolation(f"{unknown} web_sales rows have a ws_sold_date_sk missing from date_dim")
    result.null_date_rows, result.sold_dates = con.execute(
        "SELECT count(*) FILTER (WHERE ws_sold_date_sk IS NULL), count(DISTINCT ws_sold_date_sk) "
        "FROM web_sales").fetchone()
    # DuckDB names the NULL partition __HIVE_DEFAULT_PARTITION__, as the contract does, and
    # WRITE_PARTITION_COLUMNS keeps ws_sold_date_sk in each file, in its place.
    con.execute(
        f"COPY web_sales TO '{out / contract.FACT_PREFIX}' "
        f"({COPY_OPTIONS}, PARTITION_BY ({contract.DAY_FOLDER_COLUMN}), WRITE_PARTITION_COLUMNS true, "
        f"FILENAME_PATTERN 'part-{{i}}', FILE_EXTENSION 'dat')"
    )
    join_fact_files(out / contract.FACT_PREFIX)


def join_fact_files(facts: Path) -> None:
    """Make each sold-date folder hold exactly one file, as the contract says.

    A partitioned COPY may write several files into a folder (one per thread, and again
    whenever it had to close a partition's file: at SF 1, 1,824 folders got up to 2 files).
    They have no header, so they are concatenated in name order.
    """
    for folder in (p for p in facts.iterdir() if p.is_dir()):
        files = sorted(folder.glob("*.dat"), key=lambda p: (len(p.name), p.name))
        with files[0].open("ab") as first:
            for extra in files[1:]:
                with extra.open("rb") as source:
                    shutil.copyfileobj(source, first)
                extra.unlink()


def check_text_values(con: duckdb.DuckDBPyConnection, table: str) -> None:
    """Refuse a table whose text values contain `|`, `"` or a line break."""
    columns = [row[0] for row in con.execute(f"DESCRIBE {table}").fetchall() if row[1] == "VARCHAR"]
    for column in columns:
        tests = " OR ".join(f"contains({column}, chr({ord(c)}))" for c in contract.FORBIDDEN)
        bad = con.execute(f"SELECT count(*), any_value({column}) FROM {table} WHERE {tests}").fetchone()
        if bad[0]:
            raise RawContractViolation(
                f"{bad[0]} values of {table}.{column} contain one of {contract.FORBIDDEN!r}, e.g. {bad[1]!r}")


def _object_keys(out: Path) -> list[tuple[Path, str]]:
    """(local file, object key) pairs; a fact folder's one file becomes part-00000.dat."""
    pairs: list[tuple[Path, str]] = []
    for file in sorted(out.rglob("*.dat")):
        relative = file.parent.relative_to(out).as_posix()
        name = f"part-00000{contract.EXTENSION}" if relative.startswith(contract.FACT_PREFIX) else file.name
        pairs.append((file, f"{relative}/{name}"))
    return pairs


def upload_tree(storage: LakeStorage, out: Path, threads: int = UPLOAD_THREADS,
                progress: Progress = SILENT) -> tuple[int, int]:
    """Upload every file under `out` to the key of its relative path; (objects, bytes)."""
    client = storage.get_client()
    pairs = _object_keys(out)
    progress.step("uploading the raw objects", total=len(pairs))

    def put(pair: tuple[Path, str]) -> int:
        client.upload_file(str(pair[0]), storage.bucket, pair[1])
        return pair[0].stat().st_size

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
            sizes = []
            for size in pool.map(put, pairs):
                sizes.append(size)
                progress.advance()
    except (BotoCoreError, ClientError) as error:
        raise storage.unavailable(error) from error
    return len(sizes), sum(sizes)
