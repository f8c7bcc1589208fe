"""The Spark engine: one PySpark session per process (and configuration), on one of three back ends.

- `sail` (default): the Sail Spark Connect server, embedded in this process (no JVM), in
  Sail's `local` mode or its distributed runtime, `local-cluster` (a driver and workers
  exchanging data over gRPC), as `SAIL_MODE` says (settings.SailSettings).
- `remote`: any Spark Connect server (`LAKE_SPARK_REMOTE=sc://host:15002`): a Sail server
  started by `lake engine serve` (cli/engine.py) or on Kubernetes (resources/k8s/), or a
  JVM cluster with Delta and Iceberg on its classpath.
- `local`: a local JVM Spark whose Delta/Iceberg/S3A jars come from `LAKE_SPARK_JARS` (a
  directory) or `LAKE_SPARK_PACKAGES` (Maven coordinates, online machines only).

Pipeline code only uses the DataFrame API and Spark SQL (`MERGE INTO`), so it runs
unchanged on all three. No Dagster here: the CLI builds sessions from `SparkConfig`; the
Dagster resource wrapping it is `SparkEngine` (resources/engine.py).
"""

import contextlib
import logging
import os
import socket
import threading
import urllib.parse
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from lake_assets.core.errors import EngineUnavailable
from lake_assets.resources.catalog import find_catalog
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import ENGINES, LakeSettings, SailSettings

#: Jars the local JVM engine needs, by file-name prefix, and what each one is for.
REQUIRED_JARS = {
    "delta-spark": "Delta Lake for Spark (io.delta:delta-spark_2.12:3.3.x)",
    "delta-storage": "Delta storage layer (io.delta:delta-storage:3.3.x)",
    "hadoop-aws": "S3A filesystem (org.apache.hadoop:hadoop-aws:3.3.4)",
    "aws-java-sdk-bundle": "AWS SDK for S3A (com.amazonaws:aws-java-sdk-bundle:1.12.x)",
}
DEFAULT_PACKAGES = "io.delta:delta-spark_2.12:3.3.2,org.apache.hadoop:hadoop-aws:3.3.4"

_sessions: dict[tuple["SparkConfig", str], SparkSession] = {}
_sail_servers: dict[tuple[SailSettings, str], Any] = {}  # (settings, endpoint) -> pysail's SparkConnectServer
_lock = threading.Lock()


class SparkConfig(BaseModel):
    """Where Spark work runs: a session per process (`session`, for commands and tests), or of
    one run's own (`run_session`, what the Dagster resource gives a run)."""

    model_config = ConfigDict(frozen=True)

    engine: str = "sail"
    remote: str = ""
    jars_dir: str = ""
    packages: str = ""
    #: the embedded Sail server's SAIL_MODE and cluster sizes (settings.SailSettings; 0: Sail's default)
    sail_mode: str = "local"
    sail_workers: int = 0
    sail_max_workers: int = 0
    sail_worker_task_slots: int = 0
    sail_parallelism: int = 0

    @classmethod
    def from_settings(cls, settings: LakeSettings) -> "SparkConfig":
        sail = settings.sail
        return cls(engine=settings.engine, remote=settings.spark_remote,
                   jars_dir=settings.spark_jars, packages=settings.spark_packages,
                   sail_mode=sail.mode, sail_workers=sail.workers, sail_max_workers=sail.max_workers,
                   sail_worker_task_slots=sail.worker_task_slots, sail_parallelism=sail.parallelism)

    @property
    def sail(self) -> SailSettings:
        return SailSettings(mode=self.sail_mode, workers=self.sail_workers, max_workers=self.sail_max_workers,
                            worker_task_slots=self.sail_worker_task_slots, parallelism=self.sail_parallelism)

    def session(self, storage: LakeStorage) -> SparkSession:
        """The process's session for this engine, able to read and write `storage`."""
        _quiet_connect_client_log()
        if self.engine not in ENGINES:
            raise EngineUnavailable(f"LAKE_ENGINE={self.engine!r} is not one of {', '.join(ENGINES)}")
        cache_key = (self, storage.endpoint_url)
        with _lock:
            cached = _sessions.get(cache_key)
            if cached is None or not alive(cached):
                _sessions[cache_key] = self._build(storage)
            return _sessions[cache_key]

    def run_session(self, storage: LakeStorage) -> SparkSession:
        """A session of one run's own on this process's engine; `release` it when the run ends.

        On Spark Connect (Sail, remote) it is a new server-side session; on the local JVM a
        `newSession()` of the process's one SparkContext (its own SQL settings and views).
        """
        if self.engine == "local":
            return self.session(storage).newSession()
        self.session(storage)  # checks the engine and starts the embedded server, once per process
        return self._build(storage)

    def release(self, session: SparkSession) -> None:
        """End a `run_session`: the server drops it (the local JVM's context stays for the process)."""
        if self.engine != "local":
            with contextlib.suppress(PySparkException):  # dropped already, or its server is gone
                session.stop()

    def _build(self, storage: LakeStorage) -> SparkSession:
        # Spark Connect: `create()`, not `getOrCreate()`, which returns the process's default
        # session whatever server it is on (another endpoint's, or one that was dropped).
        if self.engine == "sail":
            # Iceberg TIMESTAMP columns need exactly `UTC` on the client (`Etc/UTC` fails).
            return (SparkSession.builder.remote(_sail_url(storage, self.sail))
                    .config("spark.sql.session.timeZone", "UTC").create())
        if self.engine == "remote":
            if not self.remote.startswith("sc://"):
                raise EngineUnavailable("LAKE_ENGINE=remote needs LAKE_SPARK_REMOTE=sc://host:port")
            _check_reachable(self.remote)
            return SparkSession.builder.remote(self.remote).config("spark.sql.session.timeZone", "UTC").create()
        return self._build_local_jvm(storage)

    def _build_local_jvm(self, storage: LakeStorage) -> SparkSession:
        builder = local_jvm_builder(storage, Path(self.jars_dir) if self.jars_dir else None, self.packages)
        try:
            return builder.getOrCreate()
        except Exception as error:  # the JVM failed to start or to resolve packages
            raise EngineUnavailable(f"the local JVM Spark engine did not start: {error}") from error


#: Added to the Delta jars configure_spark_with_delta_pip asks for: the S3A filesystem.
S3A_PACKAGES = ["org.apache.hadoop:hadoop-aws:3.3.4"]


def local_jvm_builder(storage: LakeStorage, jars_dir: Path | None, packages: str) -> SparkSession.Builder:
    """A local JVM Spark session builder configured the way delta-spark users expect.

    The jars come from, in order: `jars_dir` (offline: LAKE_SPARK_JARS), `packages`
    (LAKE_SPARK_PACKAGES), or delta-spark's `configure_spark_with_delta_pip` (the optional
    `jvm` dependency group: `uv sync --extra jvm`), which resolves the Delta jars matching
    the installed delta-spark from Maven. Either way the Delta SQL extensions and catalog
    are on, so `MERGE INTO`, `DESCRIBE HISTORY` and `delta.` paths work as on the engine.
    """
    builder = SparkSession.builder.master("local[*]").appName("lake")
    if jars_dir is not None:
        builder = builder.config("spark.jars", ",".join(str(p) for p in local_jars(jars_dir)))
    elif packages:
        builder = builder.config("spark.jars.packages", packages)
    else:
        try:
            from delta import configure_spark_with_delta_pip
        except ImportError:
            raise EngineUnavailable(
                "LAKE_ENGINE=local needs Delta for Spark: install the optional group (`uv sync --extra jvm`, "
                "online), or set LAKE_SPARK_JARS to a directory holding "
                + ", ".join(f"{prefix}*.jar ({what})" for prefix, what in REQUIRED_JARS.items())
                + f", or LAKE_SPARK_PACKAGES={DEFAULT_PACKAGES}"
            ) from None
        builder = configure_spark_with_delta_pip(builder, extra_packages=S3A_PACKAGES)
    key, secret = storage.credentials()
    conf = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.endpoint": storage.endpoint_url,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(storage.endpoint_url.startswith("https")).lower(),
        "spark.hadoop.fs.s3a.access.key": key,
        "spark.hadoop.fs.s3a.secret.key": secret,
        "spark.sql.session.timeZone": "UTC",
    }
    for name, value in conf.items():
        builder = builder.config(name, value)
    return builder


#: How long a remote Spark Connect server gets to accept a connection before the lake says it is not there.
CONNECT_TIMEOUT_SECONDS = 5.0


def _check_reachable(url: str) -> None:
    """Raise `EngineUnavailable` at once when nothing listens at the Spark Connect URL.

    PySpark's client retries an unreachable server with backoff for many minutes (over 300 s
    measured here) before it fails; a TCP connect tells the user in seconds.
    """
    parsed = urllib.parse.urlparse(url)
    try:
        host, port = parsed.hostname or "", parsed.port or 15002
    except ValueError:  # a port that is not a number; the URL may carry a token: not repeated
        raise EngineUnavailable("LAKE_SPARK_REMOTE is not sc://host:port") from None
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_SECONDS).close()
    except OSError as error:
        raise EngineUnavailable(f"no Spark Connect server at {host}:{port} (LAKE_SPARK_REMOTE): {error}; start one "
                                "with `lake engine serve`, or unset LAKE_SPARK_REMOTE for the embedded engine") from None


def alive(session: SparkSession) -> bool:
    """Whether the server still runs this session (one small RPC on Spark Connect).

    A Spark Connect server drops a session idle for its timeout (Sail: 900 s); the client
    object stays, and every later call fails with `session ... is not running`, so a long
    wait (run creation under load, a queued run) must not hand the dead one out again.
    A dead session is stopped, so the builder makes a new one rather than returning it.
    """
    try:
        session.version  # noqa: B018 - the property is the probe
    except PySparkException:  # dropped, or its server is gone: build another
        with contextlib.suppress(PySparkException):  # already gone on the server: nothing to release
            session.stop()
        return False
    return True


def _quiet_connect_client_log() -> None:
    """Keep the Spark Connect client's RPC tracebacks off the terminal (errors reach users as one line).

    PySpark's client logs every failed RPC with its traceback through a stderr handler it
    installs at import, disabled unless `SPARK_CONNECT_LOG_LEVEL` is set; but any later
    `logging.config.dictConfig` (Dagster's, for one) re-enables loggers it does not name.
    A level above CRITICAL survives that.
    """
    if "SPARK_CONNECT_LOG_LEVEL" not in os.environ:
        logging.getLogger("pyspark.sql.connect.client.core").setLevel(logging.CRITICAL + 1)


def local_jars(jars_dir: Path) -> list[Path]:
    """The jars in `jars_dir`; raises naming every required jar that is missing."""
    jars = sorted(jars_dir.glob("*.jar")) if jars_dir.is_dir() else []
    missing = [f"{prefix}*.jar ({what})" for prefix, what in REQUIRED_JARS.items()
               if not any(j.name.startswith(prefix) for j in jars)]
    if missing:
        raise EngineUnavailable(f"LAKE_SPARK_JARS={jars_dir} lacks: " + "; ".join(missing))
    return jars


def sail_server_environment(storage: LakeStorage, sail: SailSettings) -> dict[str, str]:
    """What a Sail server reads to serve this lake: S3, the Iceberg REST catalog, its mode.

    Holds the S3 secret: it goes into a server's environment, never onto a command line or
    into a log. The catalog's token file is written now and kept fresh by a thread of this
    process (resources/catalog.py), so the server must run as long as this process does.
    """
    env = {**storage.engine_environment(), **sail.environment()}
    catalog = find_catalog(storage)
    if catalog is not None:
        catalog.ensure_warehouse()
        env.update(catalog.sail_environment())
    env.setdefault("RUST_LOG", os.environ.get("RUST_LOG", "error"))  # engine warnings are not for the terminal
    return env


def start_sail_server(storage: LakeStorage, sail: SailSettings, ip: str = "127.0.0.1", port: int = 0) -> Any:
    """A running pysail `SparkConnectServer` (in this process) configured for `storage`.

    Sail reads its configuration from the process environment when the server is created:
    the lake's variables are set for that moment and the ones it replaced put back, except
    S3 and the catalog's, which stay (the embedded server's object store may read them later).
    """
    from pysail.spark import SparkConnectServer

    env = sail_server_environment(storage, sail)
    transient = {name: os.environ.get(name) for name in sail.environment()}
    os.environ.update(env)
    try:
        server = SparkConnectServer(ip=ip, port=port)
        server.start(background=True)
    finally:
        for name, value in transient.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return server


def _sail_url(storage: LakeStorage, sail: SailSettings) -> str:
    """Start (once per process, settings and endpoint) an embedded Sail server that reaches `storage`."""
    key = (sail, storage.endpoint_url)
    if key not in _sail_servers:
        _sail_servers[key] = start_sail_server(storage, sail)
    host, port = _sail_servers[key].listening_address
    return f"sc://{host}:{port}"
