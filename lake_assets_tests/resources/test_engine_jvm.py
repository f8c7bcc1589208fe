"""The local JVM engine is configured the way delta-spark users expect.

Java is installed here but Maven Central is not reachable, so a JVM session with Delta
cannot start on this machine: these tests check the builder's configuration (what
`getOrCreate()` would be given), not a running JVM.
"""

from pathlib import Path

import pytest
import tomllib

from lake_assets.core.errors import EngineUnavailable
from lake_assets.resources.spark import REQUIRED_JARS, S3A_PACKAGES, local_jvm_builder
from lake_assets.resources.storage import LakeStorage

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
DELTA_SQL = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
             "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}


def options(builder) -> dict[str, str]:  # SparkSession.Builder
    return dict(builder._options)


def test_pip_installed_delta_spark_gives_its_jars_and_the_delta_sql_extensions(storage: LakeStorage) -> None:
    configured = options(local_jvm_builder(storage, None, ""))
    packages = configured["spark.jars.packages"].split(",")
    assert "io.delta:delta-spark_2.12:3.3.2" in packages  # the jars of the installed delta-spark
    assert set(S3A_PACKAGES) <= set(packages)
    assert DELTA_SQL.items() <= configured.items()
    assert configured["spark.hadoop.fs.s3a.endpoint"] == storage.endpoint_url


def test_offline_jars_win_and_missing_ones_are_named(storage: LakeStorage, tmp_path: Path) -> None:
    for prefix in REQUIRED_JARS:
        (tmp_path / f"{prefix}-1.0.jar").touch()
    configured = options(local_jvm_builder(storage, tmp_path, ""))
    assert "spark.jars.packages" not in configured and configured["spark.jars"].count(".jar") == len(REQUIRED_JARS)
    assert DELTA_SQL.items() <= configured.items()
    (tmp_path / "hadoop-aws-1.0.jar").unlink()
    with pytest.raises(EngineUnavailable, match="lacks: hadoop-aws"):
        local_jvm_builder(storage, tmp_path, "")


def test_the_jvm_group_pins_delta_spark_for_the_pinned_pyspark() -> None:
    project = tomllib.loads(PYPROJECT.read_text())
    pyspark = next(d for d in project["project"]["dependencies"] if d.startswith("pyspark"))
    delta_spark = project["project"]["optional-dependencies"]["jvm"]
    assert pyspark.endswith("==3.5.7") and delta_spark == ["delta-spark==3.3.2"]  # Delta 3.3 is built for Spark 3.5
