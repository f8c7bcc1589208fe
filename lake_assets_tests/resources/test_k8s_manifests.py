"""resources/k8s/: the lake on Kubernetes, checked offline.

- `sail-lake.yaml` (+ `kustomization.yaml`, which names its image): Sail's `kubernetes-cluster` mode;
- `dagster-values.yaml`: values for Dagster's official Helm chart, the lake as its user-code deployment;
- `lake-settings.yaml`: the lake's settings the Dagster pods read.

There is no Kubernetes cluster, Helm or kustomize where this suite runs, so the manifests are
validated the way `kubectl apply --validate=strict` starts: every document against the Kubernetes
API's JSON schema (the `kubernetes-validate` package's strict schemas, vendored in the wheel, no
network), the worker pod template Sail merges into each worker pod too. The Helm values are
validated against the chart's own values schema (vendored in fixtures/, see its README), its
Kubernetes references resolved to the same strict schemas. The rest keeps them in step with the
code: the S3 and catalog variables are the ones the lake's code builds, no secret is in them, the
pods run restricted with requests and limits, and the images carry what the lake locks.
"""

import copy
import importlib.metadata
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from referencing import Registry, Resource

from lake_assets.cli.session import DAGSTER_ENV
from lake_assets.resources.catalog import LakeCatalog, sail_catalog_environment
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import ENV_VARS, LakeSettings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "lake_assets" / "resources" / "k8s"
MANIFEST = K8S / "sail-lake.yaml"
VALUES = K8S / "dagster-values.yaml"
SETTINGS = K8S / "lake-settings.yaml"
CHART_SCHEMA = ROOT / "lake_assets_tests" / "fixtures" / "dagster-helm-values.schema.json"
#: What the chart's schema references its Kubernetes types by, and the strict schemas standing in for it.
CHART_K8S_DEFINITIONS = "https://kubernetesjsonschema.dev/v1.18.0/_definitions.json"
#: The image's unprivileged user (lake_assets/resources/k8s/Dockerfile, deploy/Dockerfile).
IMAGE_UID = 10001
#: The oldest Kubernetes release the manifests target (native sidecars: initContainers with restartPolicy).
KUBERNETES_VERSION = "1.29.0"


@pytest.fixture(scope="module")
def documents() -> list[dict]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


@pytest.fixture(scope="module")
def by_kind(documents: list[dict]) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in documents}


def _server(by_kind: dict) -> tuple[dict, dict]:
    pod = by_kind[("Deployment", "sail-spark-server")]["spec"]["template"]["spec"]
    return pod, next(c for c in pod["containers"] if c["name"] == "server")


def _env(container: dict) -> dict[str, dict | str]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@pytest.mark.parametrize("version", [KUBERNETES_VERSION, kubernetes_validate.latest_version()])
def test_every_document_matches_the_kubernetes_schema(documents: list[dict], version: str) -> None:
    assert len(documents) == 8
    for document in documents:
        kubernetes_validate.validate(document, version, strict=True)  # raises, naming the field


def test_a_broken_document_is_refused(documents: list[dict]) -> None:
    """The validator is not vacuous: a misspelt field fails."""
    broken = json.loads(json.dumps(next(d for d in documents if d["kind"] == "Deployment")))
    broken["spec"]["template"]["spec"]["containers"][0]["envFrum"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_the_worker_pod_template_is_a_pod_template_giving_workers_s3(by_kind: dict) -> None:
    _, server = _server(by_kind)
    template = json.loads(_env(server)["SAIL_KUBERNETES__WORKER_POD_TEMPLATE"])
    kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "worker"},
                                  "template": template}, KUBERNETES_VERSION, strict=True)
    (worker,) = template["spec"]["containers"]
    assert worker["name"] == "worker"  # Sail's worker container: the template is merged into it by name
    sources = [s.get("configMapRef", s.get("secretRef"))["name"] for s in worker["envFrom"]]
    assert sources == ["lake-engine", "lake-s3"]


def test_the_driver_runs_sail_in_kubernetes_cluster_mode(by_kind: dict) -> None:
    pod, server = _server(by_kind)
    env = _env(server)
    assert env["SAIL_MODE"] == "kubernetes-cluster"
    assert int(env["SAIL_CLUSTER__WORKER_INITIAL_COUNT"]) >= 2
    assert env["SAIL_KUBERNETES__IMAGE"] == server["image"]
    assert env["SAIL_KUBERNETES__DRIVER_POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["SAIL_CLUSTER__DRIVER_EXTERNAL_HOST"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    namespace = by_kind[("Namespace", "lake")]["metadata"]["name"]
    assert env["SAIL_KUBERNETES__NAMESPACE"] == namespace
    assert env["SAIL_KUBERNETES__WORKER_SERVICE_ACCOUNT_NAME"] == pod["serviceAccountName"]
    # that service account may manage the worker pods
    binding = by_kind[("RoleBinding", "sail-driver")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": namespace}]
    (rule,) = by_kind[("Role", binding["roleRef"]["name"])]["rules"]
    assert rule["resources"] == ["pods"] and {"create", "delete", "list", "watch"} <= set(rule["verbs"])
    # the Service reaches the Spark Connect port the server listens on
    args = server["args"]
    port = int(args[args.index("--port") + 1])
    (service_port,) = by_kind[("Service", "sail-spark-server")]["spec"]["ports"]
    assert service_port["port"] == port
    assert {p["name"]: p["containerPort"] for p in server["ports"]}[service_port["targetPort"]] == port
    assert args[args.index("--ip") + 1] == "0.0.0.0"  # inside the pod; the Service is what is exposed


def _settings_env() -> dict[str, str]:
    return yaml.safe_load(SETTINGS.read_text())["data"]


def _lake_settings(monkeypatch: pytest.MonkeyPatch) -> LakeSettings:
    """The settings the lake's Dagster pods load from lake-settings.yaml (and the Secret's key pair)."""
    for key in ENV_VARS:
        monkeypatch.delenv(key, raising=False)
    for key, value in {**_settings_env(), "AWS_ACCESS_KEY_ID": "key", "AWS_SECRET_ACCESS_KEY": "secret"}.items():
        monkeypatch.setenv(key, value)
    return LakeSettings.from_env()


def test_s3_and_catalog_variables_are_the_lakes(by_kind: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sail's S3 and catalog settings are what the lake's code builds for the settings its Dagster pods
    read (lake-settings.yaml): the same S3, the same Polaris catalog, warehouse and token scope."""
    settings = _lake_settings(monkeypatch).storage
    engine = by_kind[("ConfigMap", "lake-engine")]["data"]
    storage = LakeStorage(**settings.model_dump()).with_endpoint(settings.endpoint)
    expected_engine = storage.engine_environment()
    credentials = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}  # from the Secret
    assert {k: v for k, v in engine.items() if k != "RUST_LOG"} == {
        k: v for k, v in expected_engine.items() if k not in credentials}

    catalog = by_kind[("ConfigMap", "lake-catalog")]["data"]
    lake_catalog = LakeCatalog(uri=settings.catalog_uri, warehouse=settings.warehouse, storage=storage, embedded=False)
    pod, server = _server(by_kind)
    (sidecar,) = pod["initContainers"]
    token_dir = next(m["mountPath"] for m in server["volumeMounts"] if m["name"] == "catalog-token")
    assert next(m["mountPath"] for m in sidecar["volumeMounts"] if m["name"] == "catalog-token") == token_dir
    expected = sail_catalog_environment(lake_catalog.uri, lake_catalog.warehouse_ref, f"{token_dir}/iceberg-token")
    assert {k: catalog[k] for k in expected} == expected
    assert catalog["LAKE_ICEBERG_URI"] == lake_catalog.uri and catalog["LAKE_ICEBERG_SCOPE"] == lake_catalog.scope
    assert f'"{token_dir}/iceberg-token"' in catalog["refresh_token.py"]
    assert 'os.environ["LAKE_ICEBERG_SCOPE"]' in catalog["refresh_token.py"]
    compile(catalog["refresh_token.py"], "refresh_token.py", "exec")
    assert sidecar["restartPolicy"] == "Always" and sidecar["image"] == server["image"]


def test_no_secret_is_shipped(documents: list[dict], by_kind: dict) -> None:
    assert "Secret" not in {d["kind"] for d in documents}  # the user creates lake-s3 from a file
    for (kind, _), document in by_kind.items():
        if kind == "ConfigMap":
            assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} & set(document["data"])
    pod, server = _server(by_kind)
    for container in [server, *pod["initContainers"]]:
        assert {"secretRef": {"name": "lake-s3"}} in container["envFrom"]
        assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} & set(_env(container))
    assert "--from-env-file" in MANIFEST.read_text()


def test_the_image_carries_the_locked_pysail_and_pyspark() -> None:
    dockerfile = (K8S / "Dockerfile").read_text()
    assert f'"pysail=={importlib.metadata.version("pysail")}"' in dockerfile
    assert f'"pyspark[connect]=={importlib.metadata.version("pyspark")}"' in dockerfile


# --------------------------------------------------------------------------- restricted pods, resources, probes


def _pod_specs(by_kind: dict) -> dict[str, dict]:
    """The driver's pod spec and the worker pod template Sail merges into each worker pod."""
    pod, server = _server(by_kind)
    worker = json.loads(_env(server)["SAIL_KUBERNETES__WORKER_POD_TEMPLATE"])["spec"]
    return {"driver": pod, "worker": worker}


def _is_restricted(pod_security: dict, container_security: dict) -> bool:
    """The Pod Security Standard `restricted` profile's container rules, pod and container settings combined."""
    merged = {**pod_security, **container_security}
    return (merged.get("runAsNonRoot") is True and merged.get("runAsUser", 0) != 0
            and merged.get("seccompProfile", {}).get("type") in ("RuntimeDefault", "Localhost")
            and container_security.get("allowPrivilegeEscalation") is False
            and container_security.get("capabilities", {}).get("drop") == ["ALL"]
            and not container_security.get("privileged", False))


def test_every_pod_runs_restricted_as_the_images_user(by_kind: dict) -> None:
    namespace = by_kind[("Namespace", "lake")]["metadata"]["labels"]
    assert namespace["pod-security.kubernetes.io/enforce"] == "restricted"
    for name, pod in _pod_specs(by_kind).items():
        assert pod["securityContext"]["runAsUser"] == IMAGE_UID, name
        for container in [*pod["containers"], *pod.get("initContainers", [])]:
            assert _is_restricted(pod["securityContext"], container["securityContext"]), (name, container["name"])
    dockerfile = (K8S / "Dockerfile").read_text()
    assert re.search(rf"^USER {IMAGE_UID}:{IMAGE_UID}$", dockerfile, re.M)
    assert f"--uid {IMAGE_UID}" in dockerfile


def test_the_restricted_check_is_not_vacuous(by_kind: dict) -> None:
    pod = _pod_specs(by_kind)["driver"]
    container = pod["containers"][0]["securityContext"]
    assert not _is_restricted({**pod["securityContext"], "runAsNonRoot": False}, container)
    assert not _is_restricted(pod["securityContext"], {**container, "allowPrivilegeEscalation": True})
    assert not _is_restricted({k: v for k, v in pod["securityContext"].items() if k != "seccompProfile"}, container)


def _quantity(value: str) -> float:
    """A Kubernetes CPU or memory quantity as a number (cores, bytes)."""
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "": 1}
    number, unit = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(value)).groups()
    return float(number) * units[unit]


def test_every_container_has_requests_and_limits(by_kind: dict) -> None:
    for name, pod in _pod_specs(by_kind).items():
        for container in [*pod["containers"], *pod.get("initContainers", [])]:
            resources = container["resources"]
            for kind in ("cpu", "memory"):
                request, limit = resources["requests"][kind], resources["limits"][kind]
                assert 0 < _quantity(request) <= _quantity(limit), (name, container["name"], kind)


def test_the_server_has_startup_readiness_and_liveness_probes(by_kind: dict) -> None:
    _, server = _server(by_kind)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert server[probe]["tcpSocket"]["port"] == "spark-connect", probe
    assert server["startupProbe"]["periodSeconds"] * server["startupProbe"]["failureThreshold"] >= 60


def test_kustomize_names_one_image_for_the_driver_its_sidecar_and_the_workers(by_kind: dict) -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert kustomization["resources"] == [MANIFEST.name]
    (image,) = kustomization["images"]
    pod, server = _server(by_kind)
    assert server["image"] == image["name"] == "lake-sail"  # `kustomize edit set image lake-sail=...` names it
    assert image["newTag"] == importlib.metadata.version("pysail")
    (replacement,) = kustomization["replacements"]
    assert replacement["source"]["fieldPath"] == "spec.template.spec.containers.[name=server].image"
    (target,) = replacement["targets"]
    assert target["select"] == {"kind": "Deployment", "name": "sail-spark-server"}
    # each target field exists in the manifest (kustomize refuses a path that does not resolve)
    assert target["fieldPaths"] == [
        "spec.template.spec.initContainers.[name=catalog-token].image",
        "spec.template.spec.containers.[name=server].env.[name=SAIL_KUBERNETES__IMAGE].value",
    ]
    assert [c["name"] for c in pod["initContainers"]] == ["catalog-token"]
    assert "SAIL_KUBERNETES__IMAGE" in _env(server)


# --------------------------------------------------------------------------- Dagster's Helm chart


@pytest.fixture(scope="module")
def values() -> dict:
    document = yaml.safe_load(VALUES.read_text())
    assert isinstance(document, dict)
    return document


def _without_required(schema: Any) -> Any:
    """The schema less its `required` lists: Helm validates the chart's defaults merged with these
    values, and the defaults (the chart's values.yaml, not vendored) supply what is left out."""
    if isinstance(schema, dict):
        return {k: _without_required(v) for k, v in schema.items() if k != "required"}
    if isinstance(schema, list):
        return [_without_required(item) for item in schema]
    return schema


@pytest.fixture(scope="module")
def chart_validator() -> jsonschema.protocols.Validator:
    schema = json.loads(CHART_SCHEMA.read_text())
    assert schema["title"] == "DagsterHelmValues"
    # The chart's schema points at kubernetesjsonschema.dev (Kubernetes 1.18, `definitions`): the same
    # types from kubernetes-validate's strict schemas (a misspelt field inside a securityContext fails).
    strict = json.loads((Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
                         / f"v{KUBERNETES_VERSION}-local-strict" / "_definitions.json").read_text())
    shim = {"$schema": strict["$schema"], "definitions": strict["$defs"], "$defs": strict["$defs"]}
    registry = Registry().with_resource(CHART_K8S_DEFINITIONS, Resource.from_contents(shim))
    jsonschema.Draft7Validator.check_schema(schema)  # Helm validates with a draft-07 validator
    return jsonschema.Draft7Validator(_without_required(schema), registry=registry)


def test_values_match_the_charts_schema(values: dict, chart_validator) -> None:
    errors = sorted(chart_validator.iter_errors(values), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors)


def _set_in(document: dict, path: tuple, value: Any) -> dict:
    broken = copy.deepcopy(document)
    node = broken
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return broken


@pytest.mark.parametrize("path, value", [
    pytest.param(("dagsterWebserver", "replicas"), 2, id="unknown-webserver-key"),
    pytest.param(("runLauncher", "type"), "K8sLauncher", id="unknown-run-launcher"),
    pytest.param(("dagster-user-deployments", "deployments", 0, "securityContext", "allowPrivilegeEscalaton"), False,
                 id="misspelt-kubernetes-field"),
    pytest.param(("dagster-user-deployments", "deployments", 0, "resources", "limits", "memory"), ["2Gi"],
                 id="bad-kubernetes-type"),
    pytest.param(("computeLogManager", "type"), "S3LogManager", id="unknown-compute-log-manager"),
    pytest.param(("dagsterDaemon", "runCoordinator", "config", "queuedRunCoordinator", "tagConcurrencyLimits", 0,
                  "limits"), 1, id="misspelt-tag-limit"),
])
def test_the_chart_schema_refuses_a_broken_copy(values: dict, chart_validator, path: tuple, value: Any) -> None:
    assert not chart_validator.is_valid(_set_in(values, path, value))


def test_the_lake_is_the_user_code_deployment(values: dict) -> None:
    user_code = values["dagster-user-deployments"]
    assert user_code["enabled"] and user_code["enableSubchart"]
    (lake,) = user_code["deployments"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    args = lake["codeServerArgs"]
    assert args[args.index("-m") + 1] == project["tool"]["dagster"]["module_name"]
    assert args[args.index("--location-name") + 1] == lake["name"] == project["tool"]["dagster"]["code_location_name"]
    assert lake["image"]["tag"] == project["project"]["version"]
    assert lake["port"] == 4000
    assert lake["includeConfigInLaunchedRuns"] == {"enabled": True}  # run pods get the same settings
    assert lake["envConfigMaps"] == [{"name": "lake-settings"}] and lake["envSecrets"] == [{"name": "lake-s3"}]
    pod, container = lake["podSecurityContext"], lake["securityContext"]
    assert pod["runAsUser"] == IMAGE_UID and _is_restricted(pod, container)
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert _is_restricted(launcher["runK8sConfig"]["podSpecConfig"]["securityContext"], launcher["securityContext"])
    for resources in (lake["resources"], launcher["resources"], values["dagsterWebserver"]["resources"],
                      values["dagsterDaemon"]["resources"]):
        for kind in ("cpu", "memory"):
            assert 0 < _quantity(resources["requests"][kind]) <= _quantity(resources["limits"][kind])
    # the image the values name is deploy/Dockerfile's: with dagster-k8s (run pods load the K8sRunLauncher)
    # and dagster-aws (compute logs), as its unprivileged user
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert "--extra aws --extra k8s" in dockerfile and f"USER {IMAGE_UID}:{IMAGE_UID}" in dockerfile
    # the chart release the values are written for is the Dagster the lake locks
    assert f"--version {importlib.metadata.version('dagster')}" in VALUES.read_text()


def test_the_instance_runs_as_the_embedded_one(values: dict) -> None:
    """Run queue, per-table limits, sensors and run monitoring as in the repository's dagster.yaml.

    The chart's daemon runs Dagster's image, without the lake's code, so its queue is Dagster's
    `QueuedRunCoordinator`, the class the embedded instance's coordinator extends."""
    import dagster as dg

    from lake_assets.run_coordinator import TableTaggingRunCoordinator

    embedded = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    daemon = values["dagsterDaemon"]
    coordinator = daemon["runCoordinator"]
    assert embedded["run_coordinator"]["class"] == TableTaggingRunCoordinator.__name__
    assert issubclass(TableTaggingRunCoordinator, dg.QueuedRunCoordinator)
    assert coordinator["enabled"] and coordinator["type"] == dg.QueuedRunCoordinator.__name__
    queued = coordinator["config"]["queuedRunCoordinator"]
    config = embedded["run_coordinator"]["config"]
    assert queued == {"maxConcurrentRuns": config["max_concurrent_runs"],
                      "dequeueIntervalSeconds": config["dequeue_interval_seconds"],
                      "tagConcurrencyLimits": config["tag_concurrency_limits"]}
    assert daemon["sensors"] == {"useThreads": embedded["sensors"]["use_threads"],
                                 "numWorkers": embedded["sensors"]["num_workers"]}
    camel = {re.sub(r"_(\w)", lambda m: m.group(1).upper(), k): v for k, v in embedded["run_monitoring"].items()}
    assert daemon["runMonitoring"] == camel
    assert values["telemetry"] == embedded["telemetry"]


def test_compute_logs_go_to_the_lakes_bucket(values: dict) -> None:
    logs = values["computeLogManager"]
    assert logs["type"] == "S3ComputeLogManager"
    config = logs["config"]["s3ComputeLogManager"]
    settings = _settings_env()
    for field, variable in (("bucket", "LAKE_S3_BUCKET"), ("endpointUrl", "LAKE_S3_ENDPOINT"),
                            ("region", "LAKE_S3_REGION")):
        assert config[field] == {"env": variable} and variable in settings
    assert config["localDir"].startswith("/tmp/")  # writable by the unprivileged user
    for component in ("dagsterWebserver", "dagsterDaemon"):  # they read the logs back: the same settings
        assert values[component]["envConfigMaps"] == [{"name": "lake-settings"}]
        assert values[component]["envSecrets"] == [{"name": "lake-s3"}]


def test_no_password_or_key_is_in_the_values(values: dict) -> None:
    assert values["generatePostgresqlPasswordSecret"] is False and "postgresqlPassword" not in values["postgresql"]
    assert values["global"]["postgresqlSecretName"] in VALUES.read_text().split("create secret generic ", 2)[2]
    text = VALUES.read_text()
    assert "AWS_SECRET_ACCESS_KEY=" not in text.replace("AWS_SECRET_ACCESS_KEY=...", "")


# --------------------------------------------------------------------------- the lake's settings for Dagster


def test_lake_settings_are_a_configmap_of_known_settings(monkeypatch: pytest.MonkeyPatch, by_kind: dict) -> None:
    document = yaml.safe_load(SETTINGS.read_text())
    kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    data = document["data"]
    assert set(data) <= set(ENV_VARS) | set(DAGSTER_ENV)
    assert {k: data[k] for k in DAGSTER_ENV} == DAGSTER_ENV
    assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} & set(data)
    settings = _lake_settings(monkeypatch)
    assert settings.spark.engine == "remote"
    # the engine is the Sail server of sail-lake.yaml, by its Service's cluster name and port
    service = by_kind[("Service", "sail-spark-server")]
    (port,) = service["spec"]["ports"]
    assert settings.spark.remote == f"sc://{service['metadata']['name']}.{service['metadata']['namespace']}.svc:{port['port']}"
    assert os.path.isabs(settings.storage.home)
