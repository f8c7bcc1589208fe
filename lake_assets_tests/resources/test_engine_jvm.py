"""The local JVM engine's configuration: jars, catalog, S3, time zone, and no secret among its settings.

Delta's jars are on no registry and Maven Central is not reachable here, so a JVM session
with Delta cannot start on this machine: these tests check the builder's configuration (what
`getOrCreate()` would be given). The `jvm` tier (test_engine_jvm_run.py) starts a real JVM
without Delta and runs the TPC-DS domain on it.
"""

from pathlib import Path

import tomllib

from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.spark import DELTA_JARS, REGISTRY_JARS, jvm_conf, local_jvm_builder, registry_jars
from lake_assets.resources.storage import LakeStorage

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
DELTA_SQL = {"spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
ICEBERG_EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def options(builder) -> dict[str, str]:  # SparkSession.Builder
    return dict(builder._options)


def test_the_jvm_extra_installs_the_registry_jars() -> None:
    jars = registry_jars()
    assert set(jars) == set(REGISTRY_JARS), jars
    assert jars["iceberg-spark-runtime"].name == "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    assert jars["hadoop-aws"].name == "hadoop-aws-3.3.1.jar"
    assert jars["aws-java-sdk-bundle"].name == "aws-java-sdk-bundle-1.11.901.jar"
    assert all(path.stat().st_size > 100_000 for path in jars.values())  # real jars, not stubs


def test_pip_installed_delta_spark_gives_its_jars_and_the_registry_ones(storage: LakeStorage,
                                                                          catalog: LakeCatalog) -> None:
    configured = options(local_jvm_builder(storage, None, ""))
    assert "io.delta:delta-spark_2.12:3.3.2" in configured["spark.jars.packages"].split(",")  # delta-spark's, Maven
    assert sorted(configured["spark.jars"].split(",")) == sorted(str(p) for p in registry_jars().values())
    assert DELTA_SQL.items() <= configured.items()
    assert configured["spark.sql.extensions"].split(",") == [DELTA_EXTENSION, ICEBERG_EXTENSION]
    assert configured["spark.hadoop.fs.s3a.endpoint"] == storage.endpoint_url


def test_the_session_gets_the_lakes_catalog_s3_and_time_zone_and_no_secret(storage: LakeStorage,
                                                                            catalog: LakeCatalog) -> None:
    configured = options(local_jvm_builder(storage, None, ""))
    assert configured["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert configured["spark.sql.catalog.lake.type"] == "rest"
    assert configured["spark.sql.catalog.lake.uri"] == catalog.uri
    assert configured["spark.sql.catalog.lake.warehouse"] == catalog.warehouse_uri
    assert configured["spark.sql.catalog.lake.oauth2-server-uri"] == f"{catalog.uri}/v1/oauth/tokens"
    assert configured["spark.sql.session.timeZone"] == "UTC"
    assert configured["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert configured["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("EnvironmentVariableCredentialsProvider")
    assert configured["spark.ui.enabled"] == "false" and configured["spark.driver.bindAddress"] == "127.0.0.1"
    # PySpark hands every builder setting to spark-submit as `--conf k=v`: none may hold the secret
    assert not [name for name, value in configured.items() if storage.credentials()[1] in value]
    assert "spark.sql.catalog.lake.credential" not in configured  # set on the running session instead


def test_offline_jars_win_delta_is_optional_and_missing_registry_jars_are_named(storage: LakeStorage,
                                                                                tmp_path: Path) -> None:
    for prefix in (*REGISTRY_JARS, *DELTA_JARS):
        (tmp_path / f"{prefix}-9.9.jar").touch()
    configured = options(local_jvm_builder(storage, tmp_path, ""))
    assert "spark.jars.packages" not in configured
    assert sorted(configured["spark.jars"].split(",")) == sorted(str(p) for p in tmp_path.glob("*.jar"))
    assert DELTA_SQL.items() <= configured.items()
    for prefix in DELTA_JARS:  # without Delta's jars: a session for the Iceberg tables only
        (tmp_path / f"{prefix}-9.9.jar").unlink()
    configured = options(local_jvm_builder(storage, tmp_path, ""))
    assert "spark.sql.catalog.spark_catalog" not in configured
    assert configured["spark.sql.extensions"] == ICEBERG_EXTENSION
    assert configured["spark.jars"].count(".jar") == len(REGISTRY_JARS)


def test_jvm_conf_without_a_catalog_names_none() -> None:
    conf = jvm_conf("https://s3.example", "", "", delta=False)
    assert not [name for name in conf if name.startswith("spark.sql.catalog.")]
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"


def test_the_jvm_group_pins_jars_for_the_pinned_pyspark() -> None:
    project = tomllib.loads(PYPROJECT.read_text())
    pyspark = next(d for d in project["project"]["dependencies"] if d.startswith("pyspark"))
    jvm = project["project"]["optional-dependencies"]["jvm"]
    assert pyspark.endswith("==3.5.7")
    # Delta 3.3 and Iceberg's 3.5 runtime are built for Spark 3.5; 1.0.3 of the Iceberg wheel ships a broken jar
    assert {"delta-spark==3.3.2", "snowpark-connect-deps-iceberg==1.0.2", "sagemaker-pyspark==1.4.5"} == set(jvm)
    assert pyspark in project["tool"]["uv"]["override-dependencies"]  # sagemaker-pyspark pins pyspark 3.3.0
