"""docker-compose.yml, checked offline.

There is no Docker engine (and no compose plugin) where this suite runs, so the file is
validated the way `docker compose config` would start: YAML -> interpolation -> the
official Compose Specification JSON schema (vendored in fixtures/compose-spec.json),
plus the cross-reference checks Compose does itself (volumes, configs, depends_on).
The rest keeps the stack in step with the code: environment variables against
`lake_assets.settings`, image tags and Maven coordinates against the installed PySpark,
and the inline Dagster instance config against Dagster's own instance schema.

A `docker-compose` binary (Debian's 1.29) on PATH is deliberately not used: it predates
the Compose Specification features this file relies on (configs with inline `content`).
"""

import copy
import importlib.metadata
import json
import os
import re
from pathlib import Path
from typing import Any

import jsonschema
import pyspark
import pytest
import yaml

from lake_assets.resources.spark import jvm_conf
from lake_assets.settings import ENV_VARS, LakeSettings, s3_credentials

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
SCHEMA_FILE = Path(__file__).resolve().parent / "fixtures" / "compose-spec.json"

DAGSTER_SERVICES = ("dagster-webserver", "dagster-daemon")

#: The credentials the file requires from the user (it ships no default for them).
REQUIRED_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
#: What a user sets (e.g. in .env) before `docker compose up`.
USER_ENV = {"AWS_ACCESS_KEY_ID": "user-chosen-key", "AWS_SECRET_ACCESS_KEY": "user-chosen-secret-value"}
SPARK_SERVICE = "spark-connect"

# Delta Lake releases built for each Spark line (docs.delta.io "Compatibility with Apache Spark").
DELTA_FOR_SPARK = {"3.5": ("3.0", "3.1", "3.2", "3.3")}

# --------------------------------------------------------------------------- helpers

# Compose interpolation: $$ (literal $), ${VAR}, ${VAR:-default}, ${VAR-default},
# ${VAR:?error}, ${VAR?error}, ${VAR:+alt}, ${VAR+alt}, $VAR.
_INTERPOLATION = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*))"
)


def _interpolate_str(text: str, env: dict[str, str]) -> str:
    def replace(m: re.Match[str]) -> str:
        if m.group("escaped"):
            return "$"
        name = m.group("braced") or m.group("named")
        op, arg = m.group("op"), m.group("arg")
        value = env.get(name)
        if op is None:
            if value is None:
                raise KeyError(f"${{{name}}} has no default and is not set")
            return value
        unset_or_empty = value is None or (op.startswith(":") and value == "")
        kind = op[-1]
        if kind == "-":
            return arg if unset_or_empty else value
        if kind == "?":
            if unset_or_empty:
                raise KeyError(f"${{{name}}} is required: {arg}")
            return value
        return "" if unset_or_empty else arg  # "+"

    return _INTERPOLATION.sub(replace, text)


def interpolate(node: Any, env: dict[str, str]) -> Any:
    """Resolve Compose variables in every string of a loaded compose document."""
    if isinstance(node, str):
        return _interpolate_str(node, env)
    if isinstance(node, list):
        return [interpolate(item, env) for item in node]
    if isinstance(node, dict):
        return {key: interpolate(value, env) for key, value in node.items()}
    return node


def environment_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def split_image(ref: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference."""
    digest = None
    if "@" in ref:
        ref, digest = ref.split("@", 1)
    name, tag = ref, None
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = ref.rsplit(":", 1)
    return name, tag, digest


def command_args(service: dict) -> list[str]:
    command = service.get("command") or []
    return command.split() if isinstance(command, str) else [str(a) for a in command]


def spark_confs(args: list[str]) -> dict[str, str]:
    confs = {}
    for flag, value in zip(args, args[1:]):
        if flag == "--conf":
            key, _, val = value.partition("=")
            confs[key] = val
    return confs


def spark_packages(args: list[str]) -> dict[str, str]:
    """{group:artifact: version} from --packages."""
    value = args[args.index("--packages") + 1]
    packages = {}
    for coordinate in value.split(","):
        group, artifact, version = coordinate.split(":")
        packages[f"{group}:{artifact}"] = version
    return packages


def published_ports(service: dict) -> list[tuple[str | None, str]]:
    """(host_ip, published) of every port mapping; host_ip None when not given."""
    out = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            if port.get("published") is None:
                continue  # long syntax without a host port: not published
            out.append((port.get("host_ip"), str(port["published"])))
            continue
        spec = str(port).split("/", 1)[0]
        if spec.startswith("["):  # [ipv6]:host:container
            host_ip, _, rest = spec[1:].partition("]:")
            out.append((host_ip, rest.split(":")[0]))
            continue
        parts = spec.split(":")
        if len(parts) == 3:
            out.append((parts[0], parts[1]))
        elif len(parts) == 2:
            out.append((None, parts[0]))
        else:  # container port only: a random host port on every interface
            out.append((None, ""))
    return out


def named_volume_sources(service: dict) -> list[str]:
    sources = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, dict):
            if volume.get("type") == "volume" and volume.get("source"):
                sources.append(volume["source"])
            continue
        source = str(volume).split(":", 1)[0]
        if ":" in str(volume) and not source.startswith((".", "/", "~", "$")):
            sources.append(source)
    return sources


def bind_mount_targets(service: dict) -> dict[str, str]:
    binds = {}
    for volume in service.get("volumes") or []:
        if isinstance(volume, str) and volume.startswith((".", "/")):
            source, target = volume.split(":")[:2]
            binds[source] = target
    return binds


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def raw_text() -> str:
    return COMPOSE_FILE.read_text()


@pytest.fixture(scope="module")
def raw(raw_text: str) -> dict:
    document = yaml.safe_load(raw_text)
    assert isinstance(document, dict)
    return document


@pytest.fixture(scope="module")
def compose(raw: dict) -> dict:
    """The file as Compose sees it when the user set only the required credentials."""
    return interpolate(raw, USER_ENV)


@pytest.fixture(scope="module")
def schema() -> dict:
    return json.loads(SCHEMA_FILE.read_text())


@pytest.fixture(scope="module")
def validator(schema: dict) -> jsonschema.protocols.Validator:
    # The spec declares draft-07 (as https://json-schema.org/draft-07/schema, which
    # jsonschema's lookup by URI does not recognise), so pick the validator explicitly.
    assert "draft-07" in schema["$schema"]
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


@pytest.fixture(scope="module")
def services(compose: dict) -> dict[str, dict]:
    return compose["services"]


@pytest.fixture(scope="module")
def default_settings() -> LakeSettings:
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k in ENV_VARS}
    try:
        return LakeSettings.from_env()
    finally:
        os.environ.update(saved)


# --------------------------------------------------------------------------- schema


def test_vendored_schema_is_the_compose_specification(schema: dict) -> None:
    assert schema["title"] == "Compose Specification"
    for key in ("services", "volumes", "configs"):
        assert key in schema["properties"]
    # inline config content (Compose >= 2.23) is what the Dagster instance config uses
    assert "content" in schema["definitions"]["config"]["properties"]


def test_file_is_valid_against_the_compose_schema(raw: dict, compose: dict, validator) -> None:
    for document in (raw, compose):
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
        assert not errors, "\n".join(
            f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors
        )


def test_no_obsolete_version_key(raw: dict) -> None:
    assert "version" not in raw


def _set(*path_and_value):
    """A mutation that sets document[path...] = value."""
    *path, key, value = path_and_value

    def mutate(document: dict) -> None:
        for part in path:
            document = document[part]
        document[key] = value

    return mutate


@pytest.mark.parametrize(
    "break_it",
    [
        pytest.param(_set("services", "minio", "imagee", "minio/minio"), id="unknown-service-key"),
        pytest.param(_set("servics", {}), id="unknown-top-level-key"),
        pytest.param(
            _set("services", "dagster-webserver", "depends_on", "postgres", "condition", "service_ready"),
            id="bad-depends-on-condition",
        ),
        pytest.param(_set("services", "postgres", "healthcheck", {"test": 1}), id="bad-healthcheck"),
        pytest.param(_set("configs", "dagster-instance", "contents", "x"), id="unknown-config-key"),
        pytest.param(
            _set("services", "minio", "ports", [{"host_ip": "127.0.0.1", "prt": 9000}]), id="bad-port"
        ),
    ],
)
def test_schema_rejects_a_broken_copy(compose: dict, validator, break_it) -> None:
    broken = copy.deepcopy(compose)
    break_it(broken)
    assert not validator.is_valid(broken)


def test_every_variable_but_the_credentials_has_a_default(raw: dict) -> None:
    # with only the credentials set, `docker compose up` works without any other variable
    interpolate(raw, USER_ENV)
    # without them it stops with a message naming the missing one
    for name in REQUIRED_CREDENTIALS:
        with pytest.raises(KeyError, match=f"{name}.* is required"):
            interpolate(raw, {k: v for k, v in USER_ENV.items() if k != name})


def test_no_credential_has_a_default(raw_text: str) -> None:
    for m in _INTERPOLATION.finditer(raw_text):
        if m.group("braced") in REQUIRED_CREDENTIALS:
            assert m.group("op") == ":?", f"${{{m.group('braced')}}} must be required (:?), not {m.group(0)}"
    assert "lake-local-secret" not in raw_text


def test_each_variable_has_one_default_everywhere(raw_text: str) -> None:
    defaults: dict[str, set[str]] = {}
    for m in _INTERPOLATION.finditer(raw_text):
        if m.group("braced") and m.group("op") in (":-", "-"):
            defaults.setdefault(m.group("braced"), set()).add(m.group("arg"))
    assert defaults, "expected ${VAR:-default} references"
    assert {k: v for k, v in defaults.items() if len(v) > 1} == {}


# --------------------------------------------------------------------------- cross references


def test_cross_references_resolve(compose: dict, services: dict) -> None:
    declared_volumes = set(compose.get("volumes") or {})
    declared_configs = set(compose.get("configs") or {})
    used_volumes: set[str] = set()
    for name, service in services.items():
        sources = named_volume_sources(service)
        used_volumes.update(sources)
        assert set(sources) <= declared_volumes, f"{name}: undeclared volume"
        for config in service.get("configs") or []:
            source = config["source"] if isinstance(config, dict) else config
            assert source in declared_configs, f"{name}: undeclared config {source}"
        for dependency, spec in (service.get("depends_on") or {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            condition = spec["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in services[dependency], f"{dependency} has no healthcheck"
            if condition == "service_completed_successfully":
                assert services[dependency].get("restart", "no") == "no", f"{dependency} must run once"
    assert used_volumes == declared_volumes, "declared volumes nobody mounts"


def test_expected_services(services: dict) -> None:
    assert set(services) == {
        "minio",
        "minio-init",
        "iceberg-rest",
        SPARK_SERVICE,
        "postgres",
        *DAGSTER_SERVICES,
    }


def test_dagster_services_wait_for_their_dependencies(services: dict) -> None:
    for name in DAGSTER_SERVICES:
        conditions = {dep: spec["condition"] for dep, spec in services[name]["depends_on"].items()}
        assert conditions == {
            "postgres": "service_healthy",
            "minio-init": "service_completed_successfully",
            SPARK_SERVICE: "service_started",
            "iceberg-rest": "service_healthy",
        }
    assert services["minio-init"]["depends_on"]["minio"]["condition"] == "service_healthy"


# --------------------------------------------------------------------------- in step with the code


def test_lake_variables_are_known_settings(raw_text: str, services: dict) -> None:
    for name, service in services.items():
        unknown = {k for k in environment_of(service) if k.startswith("LAKE_")} - set(ENV_VARS)
        assert not unknown, f"{name} sets variables lake does not read: {unknown}"
    # also variables used for interpolation anywhere in the file
    mentioned = set(re.findall(r"\bLAKE_[A-Z0-9_]+\b", raw_text))
    assert mentioned - set(ENV_VARS) == set()


def test_dagster_services_configure_the_remote_stack(services: dict) -> None:
    minio_port = "9000"
    for name in DAGSTER_SERVICES:
        env = environment_of(services[name])
        assert env["LAKE_ENGINE"] == "remote"
        assert env["LAKE_S3_ENDPOINT"] == f"http://minio:{minio_port}"
        assert env["LAKE_SPARK_REMOTE"] == f"sc://{SPARK_SERVICE}:15002"
        assert env["LAKE_S3_REGION"] == "us-east-1"
        assert env["LAKE_SENSOR_INTERVAL_SECONDS"] == "1"  # as the embedded default
        assert env["DAGSTER_HOME"].startswith(env["LAKE_HOME"].rstrip("/") + "/")
        assert env["DAGSTER_POSTGRES_HOST"] == "postgres"
    assert "server" in command_args(services["minio"])
    assert any(p.endswith(f":{minio_port}") for p in services["minio"]["ports"])
    assert any(str(p).endswith(":15002") for p in services[SPARK_SERVICE]["ports"])
    assert environment_of(services["dagster-webserver"]) == environment_of(services["dagster-daemon"])


def test_dagster_runs_with_the_lakes_dagster_settings(services: dict) -> None:
    """The stack's Dagster runs as `lake`'s own processes do: one planned event per asset for a range
    run, a range run's materializations stored as one batch (Postgres implements batches)."""
    from lake_assets.cli.session import DAGSTER_ENV

    env = environment_of(services["dagster-webserver"])
    assert {name: env.get(name) for name in DAGSTER_ENV} == DAGSTER_ENV


def test_settings_load_from_the_dagster_environment(
    services: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = environment_of(services["dagster-webserver"])
    for key in ENV_VARS:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = LakeSettings.from_env()
    assert settings.spark.engine == "remote"
    assert settings.spark.remote == f"sc://{SPARK_SERVICE}:15002"
    assert settings.storage.endpoint == "http://minio:9000"
    assert settings.sensor_interval_seconds == 1
    assert str(settings.home) == env["LAKE_HOME"]
    # a configured endpoint requires explicit credentials: the file passes the user's on
    assert s3_credentials(settings.home, embedded=False) == (
        USER_ENV["AWS_ACCESS_KEY_ID"], USER_ENV["AWS_SECRET_ACCESS_KEY"])


def test_defaults_match_the_code(compose: dict, services: dict, default_settings: LakeSettings) -> None:
    for name in DAGSTER_SERVICES:
        env = environment_of(services[name])
        assert env["LAKE_S3_BUCKET"] == default_settings.storage.bucket == "lake"
        assert env["LAKE_S3_REGION"] == default_settings.storage.region
        assert int(env["LAKE_SENSOR_INTERVAL_SECONDS"]) == default_settings.sensor_interval_seconds
    assert environment_of(services["minio-init"])["LAKE_S3_BUCKET"] == default_settings.storage.bucket
    # one set of credentials, the user's: MinIO's root user is what every client presents
    minio_env = environment_of(services["minio"])
    assert minio_env["MINIO_ROOT_USER"] == USER_ENV["AWS_ACCESS_KEY_ID"]
    assert minio_env["MINIO_ROOT_PASSWORD"] == USER_ENV["AWS_SECRET_ACCESS_KEY"]
    for name in (*DAGSTER_SERVICES, SPARK_SERVICE):
        env = environment_of(services[name])
        assert env["AWS_ACCESS_KEY_ID"] == minio_env["MINIO_ROOT_USER"]
        assert env["AWS_SECRET_ACCESS_KEY"] == minio_env["MINIO_ROOT_PASSWORD"]


def test_bucket_is_created_idempotently(services: dict) -> None:
    script = " ".join(command_args(services["minio-init"]))
    assert "mc mb --ignore-existing" in script
    assert "LAKE_S3_BUCKET" in script


def test_images_have_explicit_tags(services: dict) -> None:
    for name, service in services.items():
        repository, tag, digest = split_image(service["image"])
        assert tag or digest, f"{name}: image {service['image']} has no tag"
        assert tag != "latest", f"{name}: image {service['image']} uses latest"
        if repository.endswith(("minio/minio", "minio/mc")):
            assert re.fullmatch(r"RELEASE\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}Z", tag or "")


def _pyspark_version() -> str:
    return ".".join(pyspark.__version__.split(".")[:3])


def _bundled_jar_version(prefix: str) -> str:
    jars = Path(pyspark.__file__).parent / "jars"
    for jar in jars.glob(f"{prefix}-*.jar"):
        match = re.fullmatch(rf"{re.escape(prefix)}-(\d+\.\d+\.\d+)\.jar", jar.name)
        if match:
            return match.group(1)
    pytest.fail(f"{prefix} jar not found in {jars}")


def test_spark_image_and_packages_match_installed_pyspark(services: dict) -> None:
    spark_version = _pyspark_version()
    spark_line = ".".join(spark_version.split(".")[:2])
    scala = ".".join(_bundled_jar_version("scala-library").split(".")[:2])
    hadoop = _bundled_jar_version("hadoop-client-api")

    repository, tag, _ = split_image(services[SPARK_SERVICE]["image"])
    assert repository == "apache/spark"
    assert re.match(r"\d+\.\d+\.\d+", tag).group(0) == spark_version
    assert f"scala{scala}" in tag or "-" not in tag

    packages = spark_packages(command_args(services[SPARK_SERVICE]))
    assert packages[f"org.apache.spark:spark-connect_{scala}"] == spark_version
    assert packages["org.apache.hadoop:hadoop-aws"] == hadoop
    assert f"org.apache.iceberg:iceberg-spark-runtime-{spark_line}_{scala}" in packages
    delta = packages[f"io.delta:delta-spark_{scala}"]
    assert ".".join(delta.split(".")[:2]) in DELTA_FOR_SPARK[spark_line]
    for coordinate in packages:
        suffix = re.search(r"_(\d+\.\d+)$", coordinate)
        assert suffix is None or suffix.group(1) == scala, coordinate


def test_spark_connect_server_configuration(services: dict) -> None:
    service = services[SPARK_SERVICE]
    args = command_args(service)
    assert args[0] == "/opt/spark/sbin/start-connect-server.sh"
    assert environment_of(service)["SPARK_NO_DAEMONIZE"]  # foreground, so the container lives
    confs = spark_confs(args)
    extensions = confs["spark.sql.extensions"].split(",")
    assert "io.delta.sql.DeltaSparkSessionExtension" in extensions
    assert "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions" in extensions
    assert confs["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    # the code writes s3://bucket/... paths: route them through S3A to MinIO
    assert confs["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    endpoint = environment_of(services["dagster-webserver"])["LAKE_S3_ENDPOINT"]
    assert confs["spark.hadoop.fs.s3a.endpoint"] == endpoint
    assert confs["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert confs["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert confs["spark.hadoop.fs.s3a.aws.credentials.provider"] == (
        "com.amazonaws.auth.EnvironmentVariableCredentialsProvider"
    )
    for scheme in ("s3", "s3a"):
        assert confs[f"spark.delta.logStore.{scheme}.impl"] == "io.delta.storage.S3SingleDriverLogStore"
    # Ivy must write somewhere the spark user owns, on a volume so packages download once
    ivy = confs["spark.jars.ivy"]
    mounts = [str(v).split(":")[1] for v in service["volumes"]]
    assert any(ivy == m or ivy.startswith(m.rstrip("/") + "/") for m in mounts)


def test_ports_bind_localhost_only(services: dict) -> None:
    published = {}
    for name, service in services.items():
        for host_ip, port in published_ports(service):
            assert host_ip == "127.0.0.1", f"{name} publishes {port} on {host_ip or 'all interfaces'}"
            published[port] = name
    assert published == {
        "9000": "minio",
        "9001": "minio",
        "15002": SPARK_SERVICE,
        "8181": "iceberg-rest",
        "3000": "dagster-webserver",
    }
    assert "ports" not in services["postgres"]


def test_dagster_services_run_the_locked_project(services: dict, raw: dict) -> None:
    libraries_version = importlib.metadata.version("dagster-postgres")
    for name in DAGSTER_SERVICES:
        service = services[name]
        assert split_image(service["image"])[0] == "python"
        binds = bind_mount_targets(service)
        assert binds.get(".") == service["working_dir"] == "/opt/lake"
        env = environment_of(service)
        venv = env["UV_PROJECT_ENVIRONMENT"]
        assert not venv.startswith(service["working_dir"])  # not the host's .venv
        volume_targets = {str(v).split(":")[1] for v in service["volumes"]}
        assert venv in volume_targets
        script = " ".join(command_args(service))
        assert re.search(r"\buv==\d+\.\d+\.\d+\b", script), "uv must be pinned"
        assert "uv sync --frozen --no-dev" in script
        assert "-w workspace.yaml" in script
    # instance storage needs dagster-postgres, locked with the other dagster libraries
    locked = (ROOT / "uv.lock").read_text()
    assert f'name = "dagster-postgres"\nversion = "{libraries_version}"' in locked
    assert "dagster-webserver -h 0.0.0.0 -p 3000" in " ".join(command_args(services["dagster-webserver"]))
    assert "dagster-daemon run" in " ".join(command_args(services["dagster-daemon"]))
    # Each service syncs its own virtualenv (two concurrent `uv sync` into one would race).
    venvs = [
        v.split(":")[0]
        for name in DAGSTER_SERVICES
        for v in services[name]["volumes"]
        if str(v).endswith(":/opt/venv")
    ]
    assert len(set(venvs)) == len(DAGSTER_SERVICES)


def test_workspace_file_exists() -> None:
    if not (ROOT / "workspace.yaml").exists():
        pytest.skip("workspace.yaml not written yet")
    workspace = yaml.safe_load((ROOT / "workspace.yaml").read_text())
    assert workspace.get("load_from")


# --------------------------------------------------------------------------- Dagster instance


@pytest.fixture(scope="module")
def instance_config(compose: dict) -> dict:
    content = compose["configs"]["dagster-instance"]["content"]
    config = yaml.safe_load(content)
    assert isinstance(config, dict)
    return config


def test_instance_config_is_mounted_in_dagster_home(compose: dict, services: dict) -> None:
    for name in DAGSTER_SERVICES:
        service = services[name]
        targets = [
            c["target"]
            for c in service["configs"]
            if isinstance(c, dict) and c["source"] == "dagster-instance"
        ]
        assert targets == [environment_of(service)["DAGSTER_HOME"].rstrip("/") + "/dagster.yaml"]


def test_instance_config_uses_postgres_and_no_telemetry(instance_config: dict, services: dict) -> None:
    assert instance_config["telemetry"] == {"enabled": False}
    postgres_db = instance_config["storage"]["postgres"]["postgres_db"]
    env = environment_of(services["dagster-webserver"])
    for field in ("username", "password", "hostname", "db_name"):
        variable = postgres_db[field]["env"]
        assert variable in env, f"{variable} is not set in the Dagster services"
    assert postgres_db["port"] == 5432
    coordinator = instance_config["run_coordinator"]
    assert coordinator["module"] == "dagster.core.run_coordinator"
    assert coordinator["class"] == "QueuedRunCoordinator"
    assert {"key": "lake/table", "limit": 1} in coordinator["config"]["tag_concurrency_limits"]
    launcher = instance_config["run_launcher"]
    assert (launcher["module"], launcher["class"]) == ("dagster", "DefaultRunLauncher")


def test_instance_config_matches_the_embedded_one(instance_config: dict) -> None:
    """The per-table run limits are the same as in the repository's sqlite dagster.yaml."""
    embedded_file = ROOT / "dagster.yaml"
    if not embedded_file.exists():
        pytest.skip("dagster.yaml not written yet")
    embedded = yaml.safe_load(embedded_file.read_text()) or {}
    embedded_limits = (embedded.get("run_coordinator") or {}).get("config", {}).get("tag_concurrency_limits")
    compose_limits = instance_config["run_coordinator"]["config"]["tag_concurrency_limits"]
    assert compose_limits == embedded_limits
    assert instance_config["run_launcher"] == embedded["run_launcher"]
    assert instance_config["sensors"] == embedded["sensors"]
    assert instance_config["telemetry"] == embedded.get("telemetry")


def test_instance_config_passes_dagsters_own_validation(
    instance_config: dict, services: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster._core.instance.config import dagster_instance_config
    from dagster._serdes.config_class import ConfigurableClassData

    for key, value in environment_of(services["dagster-webserver"]).items():
        monkeypatch.setenv(key, value)
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(instance_config))
    validated, custom_class = dagster_instance_config(str(tmp_path))
    assert custom_class is None
    assert "postgres" in validated["storage"]

    # the configurable classes import and build from their config, the way the instance
    # loads them (ConfigurableClassData maps dagster.core.* to dagster._core.*)
    for section in ("run_coordinator", "run_launcher"):
        entry = validated[section]
        config_yaml = yaml.safe_dump(entry.get("config") or {})
        data = ConfigurableClassData(entry["module"], entry["class"], config_yaml)
        component = data.rehydrate()
        assert type(component).__name__ == entry["class"]


def test_iceberg_rest_catalog_is_wired_like_the_embedded_one(services: dict, default_settings: LakeSettings) -> None:
    catalog = environment_of(services["iceberg-rest"])
    for name in DAGSTER_SERVICES:
        env = environment_of(services[name])
        assert env["LAKE_ICEBERG_URI"] == "http://iceberg-rest:8181"
        assert env["LAKE_ICEBERG_WAREHOUSE"] == default_settings.storage.warehouse
        assert catalog["CATALOG_WAREHOUSE"] == f"s3://{env['LAKE_ICEBERG_WAREHOUSE']}/"
    assert catalog["CATALOG_S3_ENDPOINT"] == "http://minio:9000"
    assert "LAKE_ICEBERG_WAREHOUSE" in " ".join(command_args(services["minio-init"]))
    confs = spark_confs(command_args(services[SPARK_SERVICE]))
    assert confs["spark.sql.catalog.lake.type"] == "rest"
    assert confs["spark.sql.catalog.lake.uri"] == "http://iceberg-rest:8181"


def test_spark_connect_has_the_local_jvm_engines_catalog_time_zone_and_s3_settings(
        services: dict, default_settings: LakeSettings) -> None:
    """The server runs the pipeline's SQL as the local JVM engine does (`lake.tpcds.*`, UTC, S3A)."""
    env = environment_of(services["dagster-webserver"])
    expected = jvm_conf(env["LAKE_S3_ENDPOINT"], env["LAKE_ICEBERG_URI"], f"s3://{default_settings.storage.warehouse}",
                        delta=True)
    confs = spark_confs(command_args(services[SPARK_SERVICE]))
    assert {k: confs.get(k) for k in expected} == expected

