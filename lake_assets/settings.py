"""Every environment variable `lake` reads, with its default, in one place.

Dagster resources (`resources/`) and the CLI are built from `LakeSettings.from_env()`;
nothing else in the package reads the environment for configuration.
Secrets (`AWS_SECRET_ACCESS_KEY`) are read only when a client is built and never stored
in resource config, logs or asset metadata.
"""

import os
from dataclasses import dataclass
from pathlib import Path

#: Local credentials of the embedded S3 server, used only when no endpoint is configured
#: and the environment names none.
EMBEDDED_ACCESS_KEY_ID = "lake"
EMBEDDED_SECRET_ACCESS_KEY = "lake-local-secret"

ENV_VARS: dict[str, str] = {
    "LAKE_HOME": "state directory: embedded S3 data, Dagster instance, server files (default ./.lake)",
    "LAKE_S3_ENDPOINT": "S3 endpoint URL; unset means the embedded SeaweedFS server",
    "LAKE_S3_BUCKET": "bucket holding raw/, staging/ and curated/ (default lake)",
    "LAKE_S3_REGION": "S3 region (default us-east-1)",
    "LAKE_S3_PORT": "port of the embedded S3 server (default 8333)",
    "AWS_ACCESS_KEY_ID": "S3 access key (embedded default: lake)",
    "AWS_SECRET_ACCESS_KEY": "S3 secret key (embedded default: a local-only secret)",
    "LAKE_ENGINE": "sail (embedded, default), remote (Spark Connect URL) or local (JVM Spark)",
    "LAKE_SPARK_REMOTE": "Spark Connect URL sc://host:port; setting it selects the remote engine",
    "LAKE_SPARK_JARS": "directory of Delta/Iceberg/hadoop-aws jars for the local JVM engine",
    "LAKE_SPARK_PACKAGES": "Maven coordinates for the local JVM engine on an online machine",
    "LAKE_SENSOR_INTERVAL_SECONDS": "how often the raw-zone sensor lists S3 (default 5)",
    "LAKE_WEB_PORT": "port of the Dagster webserver started by `lake dev` (default 3000)",
    "LAKE_ICEBERG_URI": "Iceberg REST catalog URI; unset means the one the embedded S3 server serves",
    "LAKE_TPCDS_REPORT_CHECKS": "1 adds the check that every TPC-DS report equals DuckDB on the raw files "
                                "(reads the whole raw zone; default 0)",
    "LAKE_ICEBERG_WAREHOUSE": "table bucket (warehouse) of the Iceberg tables (default warehouse)",
}


@dataclass(frozen=True)
class LakeSettings:
    home: Path
    s3_endpoint: str
    s3_bucket: str
    s3_region: str
    s3_port: int
    engine: str
    spark_remote: str
    spark_jars: str
    spark_packages: str
    sensor_interval_seconds: int
    web_port: int
    iceberg_uri: str = ""
    iceberg_warehouse: str = "warehouse"
    tpcds_report_checks: bool = False

    @classmethod
    def from_env(cls) -> "LakeSettings":
        env = os.environ
        remote = env.get("LAKE_SPARK_REMOTE", "")
        return cls(
            home=Path(env.get("LAKE_HOME", ".lake")).resolve(),
            s3_endpoint=env.get("LAKE_S3_ENDPOINT", ""),
            s3_bucket=env.get("LAKE_S3_BUCKET", "lake"),
            s3_region=env.get("LAKE_S3_REGION", "us-east-1"),
            s3_port=int(env.get("LAKE_S3_PORT", "8333")),
            engine=env.get("LAKE_ENGINE", "remote" if remote else "sail"),
            spark_remote=remote,
            spark_jars=env.get("LAKE_SPARK_JARS", ""),
            spark_packages=env.get("LAKE_SPARK_PACKAGES", ""),
            sensor_interval_seconds=int(env.get("LAKE_SENSOR_INTERVAL_SECONDS", "5")),
            web_port=int(env.get("LAKE_WEB_PORT", "3000")),
            iceberg_uri=env.get("LAKE_ICEBERG_URI", ""),
            iceberg_warehouse=env.get("LAKE_ICEBERG_WAREHOUSE", "warehouse"),
            tpcds_report_checks=env.get("LAKE_TPCDS_REPORT_CHECKS", "0").strip().lower() in ("1", "true", "yes"),
        )


def s3_credentials(embedded: bool) -> tuple[str, str]:
    """Access key and secret from the environment; local defaults only for the embedded server."""
    key = os.environ.get("AWS_ACCESS_KEY_ID")
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        return key, secret
    if embedded:
        return EMBEDDED_ACCESS_KEY_ID, EMBEDDED_SECRET_ACCESS_KEY
    raise RuntimeError(
        "LAKE_S3_ENDPOINT is set but AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not; "
        "export the credentials of that S3 endpoint"
    )
