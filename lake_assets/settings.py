"""Every environment variable `lake` reads, with its default, in one place.

`ENV_VARS` says what each variable means. The resources' settings are models
(`StorageSettings`, `EngineSettings` with Sail's `SailSettings`, `RulesSettings`): each field
has its default and its variable's meaning once, the Dagster resources are those fields
(the UI shows them), and each model's `from_env` reads its variables. The code location (`definitions.py`: its resources and its sensors' pace) and the CLI are
built from `LakeSettings.from_env()`; nothing else in the package reads the environment for
configuration: assets, checks and ops receive it through the resources. A malformed value
is a `UsageError` naming the variable, never a traceback.

S3 credentials come from one place, `s3_credentials()`: the environment when the user
sets them, else (embedded server only) a per-lake pair generated on first use and kept in
`LAKE_HOME/s3-credentials.json`, readable by its owner only. They are read when a resolved
storage builds its first client and never stored in resource config, logs or asset metadata.
"""

import json
import os
import secrets
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from lake_assets.core.dms import DmsLayout
from lake_assets.core.errors import UsageError
from lake_assets.core.private_home import private_home

#: The engines LAKE_ENGINE names: Spark sessions resources/spark.py builds, and AWS job services that run
#: each declared table's apply step as a Spark job (lake_assets/aws/).
AWS_ENGINES = ("glue", "emr-serverless")
ENGINES = ("sail", "remote", "local", *AWS_ENGINES)

#: Sail's run modes the lake's own Sail server (embedded, or `lake engine serve`) runs in. Sail's third,
#: `kubernetes-cluster`, runs in Sail's own pods (the Kubernetes manifests), reached as LAKE_ENGINE=remote.
SAIL_MODES = ("local", "local-cluster")

#: File under LAKE_HOME holding the embedded server's generated credentials (mode 0600).
CREDENTIALS_FILE = "s3-credentials.json"
#: The embedded server's second identity, allowed only to read and list (`lake query --engine duckdb`).
READER_CREDENTIALS_FILE = "s3-reader-credentials.json"

ENV_VARS: dict[str, str] = {
    "LAKE_HOME": "state directory: embedded S3 data, Dagster instance, server files",
    "LAKE_S3_ENDPOINT": "S3 endpoint URL; unset means the embedded SeaweedFS server",
    "LAKE_S3_BUCKET": "bucket holding raw/, staging/ and curated/",
    "LAKE_S3_REGION": "S3 region",
    "LAKE_S3_PORT": "port of the embedded S3 server (unset: its default, or a free port when that is taken; "
                    "a port set here is used or the start fails)",
    "AWS_ACCESS_KEY_ID": "S3 access key (embedded server: generated per lake unless set)",
    "AWS_SECRET_ACCESS_KEY": "S3 secret key (embedded server: generated per lake unless set)",
    "LAKE_ENGINE": "sail (embedded, default), remote (Spark Connect URL), local (JVM Spark), or glue / emr-serverless "
                   "(each declared table's apply step runs as an AWS Glue / EMR Serverless job; the checks and "
                   "queries on Spark Connect: LAKE_SPARK_REMOTE, else embedded Sail)",
    "LAKE_SPARK_REMOTE": "Spark Connect URL sc://host:port; setting it selects the remote engine",
    "LAKE_SPARK_JARS": "directory of jars for the local JVM engine: Delta's (none: no Delta), and any that win over the jvm extra's Iceberg/S3A jars",
    "LAKE_SPARK_PACKAGES": "Maven coordinates for the local JVM engine on an online machine",
    "SAIL_MODE": "Sail's run mode for the lake's Sail server: local (default, one process, threads) or local-cluster "
                 "(a driver and workers exchanging data over gRPC, Sail's distributed runtime in one process)",
    "SAIL_CLUSTER__WORKER_INITIAL_COUNT": "local-cluster: workers started with the driver (0: Sail's default 4)",
    "SAIL_CLUSTER__WORKER_MAX_COUNT": "local-cluster: most workers Sail may run (0: Sail's default, no limit)",
    "SAIL_CLUSTER__WORKER_TASK_SLOTS": "local-cluster: tasks one worker runs at once (0: Sail's default 8)",
    "SAIL_EXECUTION__DEFAULT_PARALLELISM": "partitions a plan is split into (0: Sail's default, the CPU count); set it "
                                           "in cluster mode, where the driver's cores are not the workers'",
    "LAKE_S3_CREDENTIAL_CHAIN": "1: S3 clients (boto3, delta-rs) take their credentials from the AWS default chain "
                                "(an IAM role, environment variables), not a key pair; the AWS jobs run so",
    "LAKE_AWS_REGION": "region of the AWS Glue / EMR Serverless jobs (unset: LAKE_S3_REGION)",
    "LAKE_AWS_ENDPOINT": "endpoint of the Glue and EMR Serverless APIs (unset: AWS's own; set it for an AWS API "
                         "emulator)",
    "LAKE_AWS_CODE_PREFIX": "where in the lake's bucket the orchestrator uploads the job script and the lake's "
                            "code for the AWS jobs",
    "LAKE_AWS_PIPES_PREFIX": "where in the lake's bucket the Dagster Pipes context and messages of the AWS jobs go "
                             "(each run's removed when it ends)",
    "LAKE_AWS_POLL_SECONDS": "how often the orchestrator polls an AWS job run and its Pipes messages",
    "LAKE_GLUE_JOB_NAME": "the AWS Glue job (Spark, Glue 5) that runs the apply step with LAKE_ENGINE=glue; its "
                          "script location is LAKE_AWS_CODE_PREFIX's lake_apply_job.py",
    "LAKE_EMR_APPLICATION_ID": "the EMR Serverless Spark application (EMR 7) that runs the apply step with "
                               "LAKE_ENGINE=emr-serverless",
    "LAKE_EMR_JOB_ROLE_ARN": "the IAM role the EMR Serverless job runs as",
    "LAKE_EMR_PYTHON_ARCHIVE": "s3:// URI of a packed virtual environment (venv-pack) holding the job's Python "
                               "packages, for EMR Serverless (unset: the application's image has them)",
    "LAKE_SENSOR_INTERVAL_SECONDS": "how often the raw-zone sensors list the raw zone while they wait (default 0.25 on "
                                    "the embedded S3 server, 1 on another endpoint, where every LIST is billed)",
    "LAKE_SENSOR_WAIT_SECONDS": "how long one raw-zone sensor tick keeps listing before it reports nothing new "
                                "(default 4.25; below Dagster's 5-s sensor loop, so the zone is watched continuously)",
    "LAKE_PRESTART_RUNS": "0: a run's process starts when the run is launched, as with Dagster's default launcher "
                          "(default 1: each run's process is forked from one that imported the code location "
                          "before the run came; lake_assets/run_launcher.py)",
    "LAKE_WEB_PORT": "port of the Dagster webserver started by `lake dev` (default 3000, or a free port "
                     "when 3000 is taken; 0: a free port, printed in `lake dev`'s first line)",
    "LAKE_CDC_FOLDER_DATE_FORMAT": "date-partition folders of raw files, e.g. YYYY/MM/DD or DDMMYYYY (DMS's "
                                   "DatePartitionSequence with its DatePartitionDelimiter)",
    "LAKE_DMS_TIMESTAMP_COLUMN": "the name DMS's TimestampColumnName gives its commit-time column in a header "
                                 "(unset: the column is recognised before the source's columns by its values)",
    "LAKE_DMS_CSV_NULL_VALUE": "DMS's CsvNullValue: a field holding exactly this is NULL (unset: an empty field, "
                               "DMS's default)",
    "LAKE_FULLLOAD_MAX_SHRINK": "a full load that would shrink the table by more than this fraction of its rows, or "
                                "a TPC-DS day object its day by more than this fraction, is held for `lake approve` "
                                "(unset: each table's declared guard.max_shrink, 0.5 for TPC-DS)",
    "LAKE_TOMBSTONE_RETENTION_DAYS": "how long deleted keys are remembered against late inserts (unset: each "
                                     "table's declared tombstone_retention_days)",
    "LAKE_TIME_TRAVEL_HOURS": "how far back Delta time travel is guaranteed: vacuum keeps every file a version "
                              "inside this window needs",
    "LAKE_ICEBERG_URI": "Iceberg REST catalog URI; unset means the one the embedded S3 server serves",
    "LAKE_TPCDS_REPORT_CHECKS": "1 adds the check that every TPC-DS report equals DuckDB on the raw files "
                                "(reads the whole raw zone; default 0)",
    "LAKE_ICEBERG_WAREHOUSE": "table bucket (warehouse) of the Iceberg tables",
    "LAKE_ICEBERG_CATALOG_WAREHOUSE": "the warehouse the REST catalog is asked for (its `warehouse` parameter), where "
                                      "it names warehouses itself, e.g. an Apache Polaris catalog's name (unset: "
                                      "s3://LAKE_ICEBERG_WAREHOUSE, as the embedded server's catalog wants)",
    "LAKE_ICEBERG_SCOPE": "OAuth2 scope of the REST catalog's tokens, e.g. PRINCIPAL_ROLE:ALL for Apache Polaris "
                          "(unset: none asked for)",
}


def _setting(variable: str, default: Any) -> Any:
    """A settings field read from `variable`: its default here, its meaning in `ENV_VARS` (the
    Dagster UI shows both in the resource's configuration)."""
    return Field(default=default, description=f"{ENV_VARS[variable]} ({variable})")


class StorageSettings(BaseModel):
    """Where the lake's object store and Iceberg catalog are: each field, its default and its
    variable described once. `LakeStorage` (resources/storage.py) adds the S3 logic to these
    fields, and the `storage` resource (resources/storage_resource.py) shows them in the UI."""

    model_config = ConfigDict(frozen=True)

    endpoint: str = _setting("LAKE_S3_ENDPOINT", "")
    bucket: str = _setting("LAKE_S3_BUCKET", "lake")
    region: str = _setting("LAKE_S3_REGION", "us-east-1")
    home: str = _setting("LAKE_HOME", ".lake")
    embedded_port: int = _setting("LAKE_S3_PORT", 8333)
    embedded_port_fallback: bool = Field(
        default=True, description="if embedded_port is taken, the embedded server starts on a free port instead "
                                  "(and says so); off when LAKE_S3_PORT is set")
    catalog_uri: str = _setting("LAKE_ICEBERG_URI", "")
    warehouse: str = _setting("LAKE_ICEBERG_WAREHOUSE", "warehouse")
    catalog_warehouse: str = _setting("LAKE_ICEBERG_CATALOG_WAREHOUSE", "")
    catalog_scope: str = _setting("LAKE_ICEBERG_SCOPE", "")
    credential_chain: bool = _setting("LAKE_S3_CREDENTIAL_CHAIN", False)

    @classmethod
    def from_env(cls) -> "StorageSettings":
        env, default = os.environ, cls()
        return cls(
            endpoint=env.get("LAKE_S3_ENDPOINT", default.endpoint),
            bucket=env.get("LAKE_S3_BUCKET") or default.bucket,
            region=env.get("LAKE_S3_REGION") or default.region,
            home=str(Path(env.get("LAKE_HOME") or default.home).resolve()),
            embedded_port=_port("LAKE_S3_PORT", default.embedded_port),
            embedded_port_fallback=not env.get("LAKE_S3_PORT", "").strip(),
            catalog_uri=env.get("LAKE_ICEBERG_URI", default.catalog_uri),
            warehouse=env.get("LAKE_ICEBERG_WAREHOUSE") or default.warehouse,
            catalog_warehouse=env.get("LAKE_ICEBERG_CATALOG_WAREHOUSE", default.catalog_warehouse),
            catalog_scope=env.get("LAKE_ICEBERG_SCOPE", default.catalog_scope),
            credential_chain=_flag("LAKE_S3_CREDENTIAL_CHAIN", default.credential_chain),
        )

    @property
    def embedded(self) -> bool:
        return not self.endpoint


class SailSettings(BaseModel):
    """Sail's own settings the lake's Sail server runs with (Sail's variable names, validated here).

    0 means "Sail's default". Any other `SAIL_*` variable in the environment reaches the
    embedded server too (Sail reads its configuration from the process environment); these
    are the ones the lake types, checks and shows in the engine resource's configuration.
    """

    model_config = ConfigDict(frozen=True)

    sail_mode: str = _setting("SAIL_MODE", "local")
    sail_workers: int = _setting("SAIL_CLUSTER__WORKER_INITIAL_COUNT", 0)
    sail_max_workers: int = _setting("SAIL_CLUSTER__WORKER_MAX_COUNT", 0)
    sail_worker_task_slots: int = _setting("SAIL_CLUSTER__WORKER_TASK_SLOTS", 0)
    sail_parallelism: int = _setting("SAIL_EXECUTION__DEFAULT_PARALLELISM", 0)

    @classmethod
    def from_env(cls) -> "SailSettings":
        return cls(
            sail_mode=_choice("SAIL_MODE", SAIL_MODES, cls().sail_mode, hint="kubernetes-cluster runs in Sail's own "
                              "pods (the Kubernetes manifests): point the lake at it with LAKE_SPARK_REMOTE"),
            sail_workers=_count("SAIL_CLUSTER__WORKER_INITIAL_COUNT"),
            sail_max_workers=_count("SAIL_CLUSTER__WORKER_MAX_COUNT"),
            sail_worker_task_slots=_count("SAIL_CLUSTER__WORKER_TASK_SLOTS"),
            sail_parallelism=_count("SAIL_EXECUTION__DEFAULT_PARALLELISM"),
        )

    @property
    def sail(self) -> "SailSettings":
        """Only Sail's settings (an `EngineSettings` without its engine fields): what a Sail server is keyed by."""
        return SailSettings(**{name: getattr(self, name) for name in SailSettings.model_fields})

    def environment(self) -> dict[str, str]:
        """The variables a Sail server reads for these settings (those left at 0 are not set)."""
        env = {"SAIL_MODE": self.sail_mode}
        for name, value in (("SAIL_CLUSTER__WORKER_INITIAL_COUNT", self.sail_workers),
                            ("SAIL_CLUSTER__WORKER_MAX_COUNT", self.sail_max_workers),
                            ("SAIL_CLUSTER__WORKER_TASK_SLOTS", self.sail_worker_task_slots),
                            ("SAIL_EXECUTION__DEFAULT_PARALLELISM", self.sail_parallelism)):
            if value:
                env[name] = str(value)
        return env


class AwsJobSettings(BaseModel):
    """The AWS jobs that run each declared table's apply step with LAKE_ENGINE=glue or emr-serverless
    (lake_assets/aws/; docs/operations/aws.md). No secret here: the orchestrator's AWS calls take
    the AWS default credential chain, and the jobs their IAM role."""

    model_config = ConfigDict(frozen=True)

    aws_region: str = _setting("LAKE_AWS_REGION", "")
    aws_endpoint: str = _setting("LAKE_AWS_ENDPOINT", "")
    aws_code_prefix: str = _setting("LAKE_AWS_CODE_PREFIX", "jobs/code/")
    aws_pipes_prefix: str = _setting("LAKE_AWS_PIPES_PREFIX", "jobs/pipes/")
    aws_poll_seconds: float = _setting("LAKE_AWS_POLL_SECONDS", 5.0)
    glue_job_name: str = _setting("LAKE_GLUE_JOB_NAME", "lake-apply")
    emr_application_id: str = _setting("LAKE_EMR_APPLICATION_ID", "")
    emr_job_role_arn: str = _setting("LAKE_EMR_JOB_ROLE_ARN", "")
    emr_python_archive: str = _setting("LAKE_EMR_PYTHON_ARCHIVE", "")

    @classmethod
    def from_env(cls) -> "AwsJobSettings":
        env, default = os.environ, cls()
        return cls(
            aws_region=env.get("LAKE_AWS_REGION", "").strip(),
            aws_endpoint=env.get("LAKE_AWS_ENDPOINT", "").strip(),
            aws_code_prefix=_prefix("LAKE_AWS_CODE_PREFIX", default.aws_code_prefix),
            aws_pipes_prefix=_prefix("LAKE_AWS_PIPES_PREFIX", default.aws_pipes_prefix),
            aws_poll_seconds=_positive_float("LAKE_AWS_POLL_SECONDS", default.aws_poll_seconds),
            glue_job_name=env.get("LAKE_GLUE_JOB_NAME", "").strip() or default.glue_job_name,
            emr_application_id=env.get("LAKE_EMR_APPLICATION_ID", "").strip(),
            emr_job_role_arn=env.get("LAKE_EMR_JOB_ROLE_ARN", "").strip(),
            emr_python_archive=env.get("LAKE_EMR_PYTHON_ARCHIVE", "").strip(),
        )

    @property
    def aws(self) -> "AwsJobSettings":
        """Only the AWS jobs' settings (an `EngineSettings` without the others)."""
        return AwsJobSettings(**{name: getattr(self, name) for name in AwsJobSettings.model_fields})


class EngineSettings(SailSettings, AwsJobSettings):
    """Where Spark work runs: the engine and, for the embedded Sail server, Sail's settings, and for
    the AWS engines their jobs' settings. `SparkConfig` (resources/spark.py) builds sessions from
    these fields, and the `engine` resource (resources/engine.py) shows them in the UI."""

    engine: str = _setting("LAKE_ENGINE", "sail")
    remote: str = _setting("LAKE_SPARK_REMOTE", "")
    jars_dir: str = _setting("LAKE_SPARK_JARS", "")
    packages: str = _setting("LAKE_SPARK_PACKAGES", "")

    @classmethod
    def from_env(cls) -> "EngineSettings":
        remote = os.environ.get("LAKE_SPARK_REMOTE", "")
        return cls(
            engine=_choice("LAKE_ENGINE", ENGINES, "remote" if remote else cls().engine),
            remote=remote,
            jars_dir=os.environ.get("LAKE_SPARK_JARS", ""),
            packages=os.environ.get("LAKE_SPARK_PACKAGES", ""),
            **SailSettings.from_env().model_dump(),
            **AwsJobSettings.from_env().model_dump(),
        )

    @property
    def on_aws(self) -> bool:
        """The declared tables' apply step runs as an AWS job (LAKE_ENGINE=glue or emr-serverless)."""
        return self.engine in AWS_ENGINES


class RulesSettings(BaseModel):
    """How raw files are ingested and how long versions are kept (the `rules` resource, resources/rules.py)."""

    model_config = ConfigDict(frozen=True)

    cdc_folder_date_format: str = _setting("LAKE_CDC_FOLDER_DATE_FORMAT", DmsLayout.folder_date_format)
    dms_timestamp_column: str = _setting("LAKE_DMS_TIMESTAMP_COLUMN", DmsLayout.timestamp_column)
    dms_csv_null_value: str = _setting("LAKE_DMS_CSV_NULL_VALUE", DmsLayout.csv_null_value)
    fullload_max_shrink: float | None = _setting("LAKE_FULLLOAD_MAX_SHRINK", None)
    tombstone_retention_days: float | None = _setting("LAKE_TOMBSTONE_RETENTION_DAYS", None)
    time_travel_hours: int = _setting("LAKE_TIME_TRAVEL_HOURS", 168)

    @classmethod
    def from_env(cls) -> "RulesSettings":
        default = cls()
        return cls(
            cdc_folder_date_format=os.environ.get("LAKE_CDC_FOLDER_DATE_FORMAT") or default.cdc_folder_date_format,
            dms_timestamp_column=os.environ.get("LAKE_DMS_TIMESTAMP_COLUMN", "").strip(),
            dms_csv_null_value=os.environ.get("LAKE_DMS_CSV_NULL_VALUE", default.dms_csv_null_value),
            fullload_max_shrink=_unless_unset("LAKE_FULLLOAD_MAX_SHRINK", _fraction),
            tombstone_retention_days=_unless_unset("LAKE_TOMBSTONE_RETENTION_DAYS", _positive_float),
            time_travel_hours=_positive_int("LAKE_TIME_TRAVEL_HOURS", default.time_travel_hours),
        )

    def dms(self) -> DmsLayout:
        """The DMS layout of the insurance table's raw files."""
        return DmsLayout(self.cdc_folder_date_format, self.dms_timestamp_column, self.dms_csv_null_value)


@dataclass(frozen=True)
class LakeSettings:
    """Everything `lake` reads from its environment: the resources' settings (each read by its
    model's `from_env`), the sensors' pace and the CLI's own."""

    storage: StorageSettings
    spark: EngineSettings
    rules: RulesSettings
    sensor_interval_seconds: float
    sensor_wait_seconds: float
    web_port: int
    tpcds_report_checks: bool = False
    #: the embedded default's run launcher forks each run's process from one that waits, imported (run_launcher.py)
    prestart_runs: bool = True
    #: LAKE_WEB_PORT was set: that port or a failure, no fallback to a free one
    web_port_explicit: bool = False

    @classmethod
    def from_env(cls) -> "LakeSettings":
        storage = StorageSettings.from_env()
        return cls(
            storage=storage,
            spark=EngineSettings.from_env(),
            rules=RulesSettings.from_env(),
            sensor_interval_seconds=_sensor_interval("LAKE_SENSOR_INTERVAL_SECONDS",
                                                     EMBEDDED_SENSOR_INTERVAL_SECONDS if storage.embedded else 1.0),
            sensor_wait_seconds=_sensor_wait("LAKE_SENSOR_WAIT_SECONDS", 4.25),
            web_port=_port("LAKE_WEB_PORT", 3000, allow_any=True),
            tpcds_report_checks=_flag("LAKE_TPCDS_REPORT_CHECKS", False),
            prestart_runs=_flag("LAKE_PRESTART_RUNS", True),
            web_port_explicit=bool(os.environ.get("LAKE_WEB_PORT", "").strip()),
        )

    @property
    def home(self) -> Path:
        return Path(self.storage.home)

    @property
    def embedded(self) -> bool:
        return self.storage.embedded


def _count(name: str) -> int:
    """A whole number >= 0 (0, or unset: Sail's default)."""
    raw = os.environ.get(name, "").strip()
    if not raw or raw == "0":
        return 0
    return _positive_int(name, 0)


def _positive_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{name}={raw!r} is not a whole number") from None
    if value < 1:
        raise UsageError(f"{name}={raw!r} must be at least 1")
    return value


def _choice(name: str, allowed: tuple[str, ...], default: str, hint: str = "") -> str:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if raw.lower() not in allowed:
        raise UsageError(f"{name}={raw!r} is not one of {', '.join(allowed)}" + (f" ({hint})" if hint else ""))
    return raw.lower()


def _flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"{name}={raw!r} is not a flag (1/0, true/false, yes/no, on/off)")


def _number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise UsageError(f"{name}={raw!r} is not a number") from None


def _positive_float(name: str, default: float) -> float:
    value = _number(name, default)
    if value <= 0:
        raise UsageError(f"{name}={value!r} must be greater than 0")
    return value


#: Dagster's sensor daemon starts sensor ticks at most this often (its loop period; sensors/polling.py).
DAGSTER_SENSOR_LOOP_SECONDS = 5.0
#: A tick's look at the embedded S3 server (three LISTs on the local disk) costs ~25 ms of the code
#: server's time, and half the pace is what a landed file waits on average before its run is asked for.
EMBEDDED_SENSOR_INTERVAL_SECONDS = 0.25
#: The fastest pace: a look is a few LISTs; faster, the sensor would mostly measure itself.
MIN_SENSOR_INTERVAL_SECONDS = 0.1


def _sensor_interval(name: str, default: float) -> float:
    value = _number(name, default)
    if value < MIN_SENSOR_INTERVAL_SECONDS:
        raise UsageError(f"{name}={value!r} must be at least {MIN_SENSOR_INTERVAL_SECONDS:g} (seconds)")
    return value


def _sensor_wait(name: str, default: float) -> float:
    value = _number(name, default)
    if not 0 <= value < DAGSTER_SENSOR_LOOP_SECONDS:
        raise UsageError(f"{name}={value!r} must be at least 0 and below Dagster's {DAGSTER_SENSOR_LOOP_SECONDS:g}-s "
                         "sensor loop")
    return value


def _prefix(name: str, default: str) -> str:
    """A key prefix in the lake's bucket: no leading slash, one trailing slash."""
    raw = os.environ.get(name, "").strip().strip("/")
    return f"{raw}/" if raw else default


def _unless_unset(name: str, read: Callable[[str, float], float]) -> float | None:
    """`read`'s value of `name`, or None when it is unset (each declaration's own value applies)."""
    return read(name, 0.0) if os.environ.get(name, "").strip() else None


def _fraction(name: str, default: float) -> float:
    value = _number(name, default)
    if not 0 <= value <= 1:
        raise UsageError(f"{name}={value!r} must be a fraction between 0 and 1")
    return value


def _port(name: str, default: int, allow_any: bool = False) -> int:
    """A TCP port from `name`; with `allow_any`, 0 too, meaning "a free one, chosen by the lake"."""
    if allow_any and os.environ.get(name, "").strip() == "0":
        return 0
    value = _positive_int(name, default)
    if value > 65535:
        raise UsageError(f"{name}={value} is not a TCP port ({'0-' if allow_any else '1-'}65535)")
    return value


class S3Credentials(NamedTuple):
    """An S3 key pair (unpacks as `key, secret = ...`); the secret never appears in a repr."""

    access_key_id: str
    secret_access_key: str

    def __repr__(self) -> str:
        return f"S3Credentials(access_key_id={self.access_key_id!r}, secret_access_key='***')"


def s3_credentials(home: Path, embedded: bool) -> S3Credentials:
    """The lake's S3 credentials, for every client (boto3, delta-rs, the engine) and for weed.

    `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` from the environment win. Without them,
    the embedded server uses a pair generated for this lake on first use; an external
    endpoint (`LAKE_S3_ENDPOINT`) needs them set.
    """
    key = os.environ.get("AWS_ACCESS_KEY_ID", "")
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY", "")
    if key and secret:
        return S3Credentials(key, secret)
    if key or secret:
        missing = "AWS_SECRET_ACCESS_KEY" if key else "AWS_ACCESS_KEY_ID"
        raise UsageError(f"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together: set {missing} too, "
                         "or unset both")
    if not embedded:
        raise UsageError("LAKE_S3_ENDPOINT is set but AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not; "
                         "export the credentials of that S3 endpoint")
    return embedded_credentials(home)


def embedded_credentials(home: Path) -> S3Credentials:
    """This lake's generated pair: read from LAKE_HOME, created (0600) by the first caller."""
    return _generated_pair(home / CREDENTIALS_FILE, "lake-")


def embedded_reader_credentials(home: Path) -> S3Credentials:
    """The embedded server's read-only pair (S3 actions Read and List only), generated like the main one."""
    return _generated_pair(home / READER_CREDENTIALS_FILE, "lake-reader-")


def _generated_pair(path: Path, prefix: str) -> S3Credentials:
    """A key pair kept at `path`, created (0600) by the first caller.

    Creation is atomic (write a private temporary file, then hard-link it into place), so
    two first commands at once agree on one pair.
    """
    if not path.exists():
        private_home(path.parent)
        pair = {"access_key_id": prefix + secrets.token_hex(8), "secret_access_key": secrets.token_urlsafe(32)}
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-")  # mode 0600
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(pair, handle)
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process created it first: use theirs
        finally:
            os.unlink(temporary)
    try:
        stored = json.loads(path.read_text())
        return S3Credentials(str(stored["access_key_id"]), str(stored["secret_access_key"]))
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"{path} is not a valid credentials file; delete it to generate a new pair "
                         "(the embedded server then uses the new one)") from None
