"""The Spark engine: one PySpark session per process (and configuration), on one of three back ends.

- `sail` (default): the Sail Spark Connect server, embedded in this process (no JVM), in
  Sail's `local` mode or its distributed runtime, `local-cluster` (a driver and workers
  exchanging data over gRPC), as `SAIL_MODE` says (settings.SailSettings).
- `remote`: any Spark Connect server (`LAKE_SPARK_REMOTE=sc://host:15002`): a Sail server
  started by `lake engine serve` (cli/engine.py) or on Kubernetes (resources/k8s/), or a
  JVM cluster with Delta and Iceberg on its classpath.
- `local`: a local JVM Spark with the Iceberg REST catalog and S3A (jars from the `jvm`
  extra's registry packages) and Delta (jars from `LAKE_SPARK_JARS`, a directory, or Maven:
  `LAKE_SPARK_PACKAGES` or delta-spark's helper, online machines only).

Pipeline code only uses the DataFrame API and Spark SQL (`MERGE INTO`), so it runs
unchanged on all three. No Dagster here: the CLI builds sessions from `SparkConfig`; the
Dagster resource wrapping it is `SparkEngine` (resources/engine.py).
"""

import atexit
import contextlib
import functools
import importlib.util
import logging
import os
import socket
import threading
import urllib.parse
from pathlib import Path
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from lake_assets.core.environment import environment
from lake_assets.core.errors import EngineUnavailable
from lake_assets.core.tables import ICEBERG_CATALOG
from lake_assets.resources.catalog import find_catalog
from lake_assets.resources.connect_retry import retry_undecodable_replies
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import ENGINES, EngineSettings, LakeSettings, SailSettings

#: Jars of the local JVM engine that the `jvm` extra installs from package registries:
#: file-name prefix -> (the package holding them, the jar's name pattern, what it is for).
REGISTRY_JARS = {
    "iceberg-spark-runtime": ("snowpark_connect_deps_iceberg", "iceberg-spark-runtime-3.5_2.12-*.jar",
                              "Iceberg for Spark 3.5 (org.apache.iceberg:iceberg-spark-runtime-3.5_2.12)"),
    "hadoop-aws": ("sagemaker_pyspark", "hadoop-aws-3.3.*.jar", "S3A filesystem (org.apache.hadoop:hadoop-aws:3.3.x)"),
    "aws-java-sdk-bundle": ("sagemaker_pyspark", "aws-java-sdk-bundle-*.jar",
                            "AWS SDK for S3A (com.amazonaws:aws-java-sdk-bundle)"),
}
#: Delta's jars, on no registry: from LAKE_SPARK_JARS, LAKE_SPARK_PACKAGES or Maven (delta-spark's pip helper).
DELTA_JARS = {
    "delta-spark": "Delta Lake for Spark (io.delta:delta-spark_2.12:3.3.x)",
    "delta-storage": "Delta storage layer (io.delta:delta-storage:3.3.x)",
}
#: Maven coordinates of the registry jars, for an online machine without the `jvm` extra.
REGISTRY_PACKAGES = {"iceberg-spark-runtime": "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2",
                     "hadoop-aws": "org.apache.hadoop:hadoop-aws:3.3.4"}
DEFAULT_PACKAGES = ",".join(["io.delta:delta-spark_2.12:3.3.2", *REGISTRY_PACKAGES.values()])
#: S3A reads the key pair from the JVM's environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
ENV_CREDENTIALS = "com.amazonaws.auth.EnvironmentVariableCredentialsProvider"

_sessions: dict[tuple["SparkConfig", str], SparkSession] = {}
_sail_servers: dict[tuple[SailSettings, str], Any] = {}  # (settings, endpoint) -> pysail's SparkConnectServer
_lock = threading.Lock()
_servers_lock = threading.Lock()  # apart from _lock: a session build under _lock starts a server
#: Every Spark Connect session this process built, referenced until exit. PySpark's
#: `SparkSession.__del__` closes its client, and closing shuts down the process-wide pool that
#: releases executions (`Pool.join()` under a class lock). Garbage collection runs `__del__`
#: in whichever thread is allocating; when that is one of that pool's own workers, the worker
#: joins its own pool and never returns, and every later query of the process waits on the
#: lock (a test run hung so, collecting a finished run's session). So no session is collected.
_built: list[SparkSession] = []


class SparkConfig(EngineSettings):
    """Where Spark work runs (the fields: `settings.EngineSettings`): a session per process
    (`session`, for commands and tests), or of one run's own (`run_session`, what the Dagster
    resource gives a run)."""

    @classmethod
    def from_settings(cls, settings: LakeSettings) -> "SparkConfig":
        return cls(**settings.spark.model_dump())

    @property
    def session_engine(self) -> str:
        """The engine sessions are built on. The AWS engines run only the declared tables' apply step
        on AWS (lake_assets/aws/); the checks, queries and the TPC-DS domain run on Spark Connect
        (LAKE_SPARK_REMOTE, else the embedded Sail server)."""
        if self.on_aws:
            return "remote" if self.remote else "sail"
        return self.engine

    def session(self, storage: LakeStorage) -> SparkSession:
        """The process's session for this engine, able to read and write `storage`."""
        self._check_engine()
        cache_key = (self, storage.endpoint_url)
        with _lock:
            cached = _sessions.get(cache_key)
            if cached is None or not alive(cached):
                _sessions[cache_key] = self._build(storage)
            return _sessions[cache_key]

    def run_session(self, storage: LakeStorage) -> SparkSession:
        """A session of one run's own on this process's engine: on Spark Connect (Sail, remote)
        a new server-side session, on the local JVM a `newSession()` of the process's one
        SparkContext (its own SQL settings and views).

        Nothing ends it: the run forgets it and the process keeps it referenced (`_built`).
        Spark Connect 3.5 has no call that releases a session on the server (the server drops
        it when idle), and the client's `stop()` closes its channel and the process-wide pool
        that releases executions, which disturbed the process's other sessions (failed
        releases, an abort at exit, a hang when garbage collection did it).
        """
        if self.session_engine == "local":
            return with_catalog_credential(self.session(storage).newSession(), storage)
        self._check_engine()
        return self._build(storage)  # the embedded Sail server is started once per process (`_sail_url`)

    def _check_engine(self) -> None:
        _quiet_connect_client_log()
        if self.engine not in ENGINES:
            raise EngineUnavailable(f"LAKE_ENGINE={self.engine!r} is not one of {', '.join(ENGINES)}")

    def _build(self, storage: LakeStorage) -> SparkSession:
        # Spark Connect: `create()`, not `getOrCreate()`, which returns the process's default
        # session whatever server it is on (another endpoint's, or one that was dropped).
        if self.session_engine == "local":
            return self._build_local_jvm(storage)
        _finish_releases_at_exit()
        retry_undecodable_replies()
        if self.session_engine == "remote":
            if not self.remote.startswith("sc://"):
                raise EngineUnavailable("LAKE_ENGINE=remote needs LAKE_SPARK_REMOTE=sc://host:port")
            _check_reachable(self.remote)
        url = self.remote if self.session_engine == "remote" else _sail_url(storage, self.sail)
        # Iceberg TIMESTAMP columns need exactly `UTC` on the client (`Etc/UTC` fails).
        session = SparkSession.builder.remote(url).config("spark.sql.session.timeZone", "UTC").create()
        _built.append(session)
        return session

    def _build_local_jvm(self, storage: LakeStorage) -> SparkSession:
        # PySpark takes the Spark Connect path (and its functions the Connect implementations)
        # while these are set: inherited from a process that used Spark Connect, or the user's
        # SPARK_REMOTE. This process runs a JVM session instead.
        for name in CONNECT_MODE_VARIABLES:
            os.environ.pop(name, None)
        builder = local_jvm_builder(storage, Path(self.jars_dir) if self.jars_dir else None, self.packages)
        try:
            return start_local_jvm(builder, storage)
        except Exception as error:  # the JVM failed to start or to resolve packages
            raise EngineUnavailable(f"the local JVM Spark engine did not start: {error}") from error


def registry_jars() -> dict[str, Path]:
    """The registry jars the `jvm` extra installed (by prefix); absent ones are left out."""
    found: dict[str, Path] = {}
    for prefix, (package, pattern, _) in REGISTRY_JARS.items():
        spec = importlib.util.find_spec(package)  # finds the package without importing it
        for location in (spec.submodule_search_locations or []) if spec else []:
            jars = sorted((Path(location) / "jars").glob(pattern))
            if jars:
                found[prefix] = jars[-1]
    return found


def jvm_conf(endpoint_url: str, catalog_uri: str, warehouse_ref: str, delta: bool, scope: str = "") -> dict[str, str]:
    """The JVM Spark settings the lake runs with, none of them secret: the local builder's, and
    docker-compose's Spark Connect server's (a test keeps the two in step).

    - the Iceberg REST catalog as `lake` beside Delta's `spark_catalog` (the pipeline's SQL names
      `lake.tpcds.web_sales`; ``delta.`s3://...` `` resolves in `spark_catalog`), its files
      through S3A like every other path (HadoopFileIO), its token fetched with the S3 key pair
      (`credential`, set on the running session by `start_local_jvm`) in `scope` when one is set;
    - `s3://` through S3A, path-style, credentials from the JVM's environment (AWS_ACCESS_KEY_ID,
      AWS_SECRET_ACCESS_KEY), never from a setting on the `java` command line;
    - the session time zone Sail's sessions get (UTC: Iceberg TIMESTAMP columns need it).
    """
    extensions = ["org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"]
    conf = {
        "spark.sql.session.timeZone": "UTC",
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.endpoint": endpoint_url,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint_url.startswith("https")).lower(),
        "spark.hadoop.fs.s3a.aws.credentials.provider": ENV_CREDENTIALS,
    }
    if delta:
        extensions.insert(0, "io.delta.sql.DeltaSparkSessionExtension")
        conf["spark.sql.catalog.spark_catalog"] = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        # one driver writes each Delta log: the single-driver log store is safe on S3
        conf["spark.delta.logStore.s3.impl"] = conf["spark.delta.logStore.s3a.impl"] = \
            "io.delta.storage.S3SingleDriverLogStore"
    conf["spark.sql.extensions"] = ",".join(extensions)
    if catalog_uri:
        catalog = f"spark.sql.catalog.{ICEBERG_CATALOG}"
        conf.update({
            catalog: "org.apache.iceberg.spark.SparkCatalog",
            f"{catalog}.type": "rest",
            f"{catalog}.uri": catalog_uri,
            f"{catalog}.warehouse": warehouse_ref,
            f"{catalog}.oauth2-server-uri": f"{catalog_uri}/v1/oauth/tokens",
            f"{catalog}.io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
        })
        if scope:
            conf[f"{catalog}.scope"] = scope
    return conf


def local_jvm_builder(storage: LakeStorage, jars_dir: Path | None, packages: str) -> SparkSession.Builder:
    """A local JVM Spark session builder for this lake (the secrets are added by `start_local_jvm`).

    Jars: the Iceberg runtime and S3A from the `jvm` extra's registry packages (or from
    `jars_dir` when it holds them), and Delta's from, in order: `jars_dir` (offline:
    LAKE_SPARK_JARS; without Delta jars there, the session has no Delta and only the Iceberg
    tables can be written), `packages` (LAKE_SPARK_PACKAGES, Maven coordinates), or delta-spark's
    `configure_spark_with_delta_pip`, which resolves the Delta jars matching the installed
    delta-spark from Maven (online). With Delta, its SQL extensions and catalog are on, so
    `MERGE INTO`, `DESCRIBE HISTORY` and `delta.` paths work as on Sail.
    """
    builder = (SparkSession.builder.master("local[*]").appName("lake")
               .config("spark.ui.enabled", "false")  # no web UI: it would listen on every interface
               .config("spark.ui.showConsoleProgress", "false")  # no progress bars on the user's terminal
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1"))
    if jars_dir is not None and not jars_dir.is_dir():
        raise EngineUnavailable(f"LAKE_SPARK_JARS={jars_dir} is not a directory")
    jars = {**registry_jars(), **(_dir_jars(jars_dir) if jars_dir is not None else {})}
    delta = all(prefix in jars for prefix in DELTA_JARS) or bool(packages) or jars_dir is None
    missing = [prefix for prefix in REGISTRY_JARS if prefix not in jars]
    if missing and jars_dir is not None and not packages:
        raise EngineUnavailable(f"LAKE_SPARK_JARS={jars_dir} lacks: " + "; ".join(
            f"{prefix}*.jar ({REGISTRY_JARS[prefix][2]})" for prefix in missing)
            + " (the `jvm` extra installs them: `uv sync --extra jvm`)")
    if jars:
        builder = builder.config("spark.jars", ",".join(str(path) for path in jars.values()))
    if packages:
        builder = builder.config("spark.jars.packages", packages)
    elif jars_dir is None:
        try:
            from delta import configure_spark_with_delta_pip
        except ImportError:
            raise EngineUnavailable(
                "LAKE_ENGINE=local needs Delta for Spark: install the optional group (`uv sync --extra jvm`, "
                "online), or set LAKE_SPARK_JARS to a directory holding "
                + ", ".join(f"{prefix}*.jar ({what})" for prefix, what in DELTA_JARS.items())
                + f", or LAKE_SPARK_PACKAGES={DEFAULT_PACKAGES}"
            ) from None
        builder = configure_spark_with_delta_pip(builder, extra_packages=[REGISTRY_PACKAGES[p] for p in missing
                                                                          if p in REGISTRY_PACKAGES])
    catalog = find_catalog(storage)
    conf = jvm_conf(storage.endpoint_url, catalog.uri if catalog else "", catalog.warehouse_ref if catalog else "",
                    delta, catalog.scope if catalog else "")
    for name, value in conf.items():
        builder = builder.config(name, value)
    return builder


def _dir_jars(jars_dir: Path) -> dict[str, Path]:
    """Every jar in `jars_dir`, keyed by the prefix the engine knows it by (else by its file name)."""
    found: dict[str, Path] = {}
    for jar in sorted(jars_dir.glob("*.jar")):
        found[next((p for p in (*REGISTRY_JARS, *DELTA_JARS) if jar.name.startswith(p)), jar.name)] = jar
    return found


def start_local_jvm(builder: SparkSession.Builder, storage: LakeStorage) -> SparkSession:
    """Start the JVM from `builder` with the lake's secrets kept off its command line.

    PySpark passes every builder setting to `spark-submit` as `--conf k=v` (visible in `ps`),
    so the S3 key pair reaches the JVM through its environment (S3A's environment credentials
    provider reads it; the variables are set for the launch only), and the REST catalog's
    `credential` is set on the running session, before anything loads the catalog.
    """
    key, secret = storage.credentials()
    with environment({"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": storage.region}):
        session = builder.getOrCreate()
    return with_catalog_credential(session, storage)


def with_catalog_credential(session: SparkSession, storage: LakeStorage) -> SparkSession:
    """Set the REST catalog's credential on a JVM `session` (a runtime setting of that session
    alone: a `newSession()` does not inherit it), before anything loads the catalog."""
    if session.conf.get(f"spark.sql.catalog.{ICEBERG_CATALOG}", None):
        key, secret = storage.credentials()
        session.conf.set(f"spark.sql.catalog.{ICEBERG_CATALOG}.credential", f"{key}:{secret}")
    return session


#: Variables that put PySpark in Spark Connect mode (set by PySpark itself once it made a Connect session).
CONNECT_MODE_VARIABLES = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")

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


@functools.cache
def _finish_releases_at_exit() -> None:
    """Make this process wait, at exit, for the executions the Spark Connect client is still releasing.

    PySpark releases each finished execution on the server from a pool of daemon threads. A
    release still in flight when the interpreter finalizes returns into a thread that may no
    longer run Python: glibc unwinds it through gRPC's C++ frames and the process aborts
    (`terminate called without an active exception`, exit -6) after all its work was done;
    `lake run` on local-cluster did once. Closing the pool waits for what it holds.
    """
    from pyspark.sql.connect.client.reattach import ExecutePlanResponseReattachableIterator

    atexit.register(ExecutePlanResponseReattachableIterator.shutdown)


def _quiet_connect_client_log() -> None:
    """Keep the Spark Connect client's RPC tracebacks off the terminal (errors reach users as one line).

    PySpark's client logs every failed RPC with its traceback through a stderr handler it
    installs at import, disabled unless `SPARK_CONNECT_LOG_LEVEL` is set; but any later
    `logging.config.dictConfig` (Dagster's, for one) re-enables loggers it does not name.
    A level above CRITICAL survives that.
    """
    if "SPARK_CONNECT_LOG_LEVEL" not in os.environ:
        logging.getLogger("pyspark.sql.connect.client.core").setLevel(logging.CRITICAL + 1)


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

    pysail takes no configuration but the address (`SparkConnectServer(ip, port)`); Sail reads
    the rest from the process environment, at two moments. Its own settings (`SAIL_*`: the mode,
    the worker counts, the catalog list) are read when the server is created, so they are set
    for that moment only and what they replaced is put back. Its object store reads the S3
    variables (`AWS_*`) later, when a query reaches a bucket: a server started with them set
    only around its creation failed to read `s3://` in its first session and in a later one
    (the store fell back to AWS's own endpoint) while its catalog worked (pysail 0.7.2). So the
    S3 variables stay in this process's environment (`test_sail_environment.py` checks both).
    """
    from pysail.spark import SparkConnectServer

    env = sail_server_environment(storage, sail)
    read_at_start = {name: value for name, value in env.items() if name.startswith("SAIL_")}
    os.environ.update({name: value for name, value in env.items() if name not in read_at_start})
    with environment(read_at_start):
        server = SparkConnectServer(ip=ip, port=port)
        server.start(background=True)
    return server


def _sail_url(storage: LakeStorage, sail: SailSettings) -> str:
    """Start (once per process, settings and endpoint) an embedded Sail server that reaches `storage`."""
    key = (sail, storage.endpoint_url)
    with _servers_lock:
        if key not in _sail_servers:
            _sail_servers[key] = start_sail_server(storage, sail)
    host, port = _sail_servers[key].listening_address
    return f"sc://{host}:{port}"
