"""The `jvm` tier: the TPC-DS domain end to end on a local JVM Spark, with the same tables as on Sail.

Two lakes on the session's S3 server (each its own bucket and Iceberg table bucket,
helpers/lakes.py) get the same raw input: the TPC-DS dimensions and two days of web_sales at
SF 0.01 (in 2000, which the reports read), plus the rows without a sold date. One is applied
by `lake run` on the embedded Sail engine, the other by `lake run` with `LAKE_ENGINE=local`:
a JVM Spark 3.5.7 (PySpark's own jars) whose Iceberg runtime and S3A jars come from the `jvm`
extra's registry packages. No Delta jar is on any registry, so that JVM runs without Delta
(`LAKE_SPARK_JARS` names a directory without Delta jars): the star, its reports and the
ledger are Iceberg or written by delta-rs, and this clean input quarantines nothing and
deletes nothing (the TPC-DS Delta tables, quarantine and tombstones, stay unwritten on both).
Every TPC-DS table and the ledger must then hold the same rows in both lakes, read by
pyiceberg and delta-rs, not by an engine.

While the JVM runs, its command line is read from /proc: the S3 secret must not be on it.
"""

import datetime as dt
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lake_assets.core.tables import LEDGER, TABLES, Domain, TableFormat
from lake_assets.resources.embedded_s3 import EmbeddedS3
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.lakes import Lake, assert_same_tables, drop, new_lake
from lake_assets_tests.helpers.tpcds import generated, land_dimensions, land_facts, sold_dates

pytestmark = pytest.mark.jvm

JAVA_HOME = Path("/usr/lib/jvm/java-17-openjdk-amd64")
#: The main class of the JVM PySpark starts (`spark-submit ... pyspark-shell`).
SPARK_SUBMIT = b"org.apache.spark.deploy.SparkSubmit"


def _land_star(storage: LakeStorage) -> None:
    """The dimensions and two sold days of 2000 (so every report has rows), and the rows without a sold date.

    Days where q86's twelve months hold no row would not do: over no rows, JVM Spark's
    `GROUP BY rollup(...)` gives no row, where Sail and DuckDB give the grand total's (NULL)."""
    oracle = generated(0.01)
    land_dimensions(storage, oracle)
    days = [day for day in sold_dates(oracle) if day is not None and day >= dt.date(2000, 2, 1)][:2]
    land_facts(storage, oracle, [*days, None])


@pytest.fixture
def lakes(s3_server: EmbeddedS3, lake_home: Path) -> Iterator[tuple[Lake, Lake]]:
    sail, jvm = new_lake(s3_server, lake_home, "sail"), new_lake(s3_server, lake_home, "jvm")
    yield sail, jvm
    drop(sail)
    drop(jvm)


class CommandLines(threading.Thread):
    """Reads the command line of every JVM PySpark starts, until stopped; records what it saw."""

    def __init__(self, secret: str) -> None:
        super().__init__(daemon=True)
        self.secret = secret.encode()
        self.seen: set[str] = set()
        self.leaked = False
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.2):
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    line = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:  # gone meanwhile
                    continue
                if SPARK_SUBMIT in line:
                    self.seen.add(pid)
                    self.leaked |= self.secret in line


def _java_environment() -> dict[str, str]:
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return {}
    if JAVA_HOME.is_dir():
        return {"JAVA_HOME": str(JAVA_HOME)}
    pytest.skip("no Java on this machine (JAVA_HOME unset, no java on PATH)")


def test_the_tpcds_domain_on_jvm_spark_gives_sails_tables(lakes: tuple[Lake, Lake], tmp_path: Path) -> None:
    sail, jvm = lakes
    java = _java_environment()
    _land_star(sail.storage)
    run = sail.lake("run")
    assert run.returncode == 0, run.stdout + run.stderr

    _land_star(jvm.storage)
    no_delta = tmp_path / "jars"
    no_delta.mkdir()
    watcher = CommandLines(jvm.storage.credentials()[1])
    watcher.start()
    try:
        run = jvm.lake("run", extra={"LAKE_ENGINE": "local", "LAKE_SPARK_JARS": str(no_delta), **java}, timeout=900)
    finally:
        watcher.stopped.set()
        watcher.join()
    assert run.returncode == 0, run.stdout + run.stderr[-5000:]
    assert watcher.seen and not watcher.leaked, watcher.seen

    tpcds = [name for name, table in TABLES.items() if table.domain is Domain.TPCDS]
    compared = assert_same_tables(jvm, sail, [*tpcds, LEDGER.name])
    # the star, its six reports and the ledger were built and compared (Delta quarantine/tombstones: none)
    assert compared == {LEDGER.name, *(n for n in tpcds if TABLES[n].format is TableFormat.ICEBERG)}, compared
