"""resources/k8s/: Sail's `kubernetes-cluster` mode for the lake, checked offline.

There is no Kubernetes cluster where this suite runs, so the manifests are validated the way
`kubectl apply --validate=strict` starts: every document against the Kubernetes API's JSON
schema (the `kubernetes-validate` package's strict schemas, vendored in the wheel, no network),
the worker pod template Sail merges into each worker pod too. The rest keeps them in step with
the code: the S3 and catalog variables are the ones the embedded engine sets, no secret is in
them, and the image carries the pysail release the lake locks.
"""

import importlib.metadata
import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from lake_assets.resources.catalog import sail_catalog_environment
from lake_assets.resources.storage import LakeStorage

K8S = Path(__file__).resolve().parents[2] / "lake_assets" / "resources" / "k8s"
MANIFEST = K8S / "sail-lake.yaml"
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


def test_s3_and_catalog_variables_are_the_embedded_engines(by_kind: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = by_kind[("ConfigMap", "lake-engine")]["data"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    storage = LakeStorage(endpoint=engine["AWS_ENDPOINT"], region=engine["AWS_REGION"]).with_endpoint(
        engine["AWS_ENDPOINT"])
    expected_engine = storage.engine_environment()
    credentials = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}  # from the Secret
    assert {k: v for k, v in engine.items() if k != "RUST_LOG"} == {
        k: v for k, v in expected_engine.items() if k not in credentials}

    catalog = by_kind[("ConfigMap", "lake-catalog")]["data"]
    pod, server = _server(by_kind)
    (sidecar,) = pod["initContainers"]
    token_dir = next(m["mountPath"] for m in server["volumeMounts"] if m["name"] == "catalog-token")
    assert next(m["mountPath"] for m in sidecar["volumeMounts"] if m["name"] == "catalog-token") == token_dir
    expected = sail_catalog_environment(catalog["LAKE_ICEBERG_URI"], "s3://warehouse", f"{token_dir}/iceberg-token")
    assert {k: catalog[k] for k in expected} == expected
    assert f'"{token_dir}/iceberg-token"' in catalog["refresh_token.py"]
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
