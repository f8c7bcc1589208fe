"""Each resource's configuration is one settings model of settings.py: the UI shows every field of
it with its meaning, and the values the environment sets reach the resource."""

import pytest

from lake_assets.definitions import build_definitions
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.rules import LakeRules
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.settings import EngineSettings, LakeSettings, RulesSettings, StorageSettings


def test_the_ui_shows_every_field_of_each_settings_model() -> None:
    job = build_definitions(LakeSettings.from_env()).resolve_job_def("apply_insurance")
    for key, model in (("storage", StorageSettings), ("engine", EngineSettings), ("rules", RulesSettings)):
        shown = job.resource_defs[key].config_schema.as_field().config_type.fields
        assert set(shown) == set(model.model_fields), key
        for name, field in shown.items():
            assert field.description and field.description == model.model_fields[name].description, (key, name)
            assert field.default_value == model.model_fields[name].default, (key, name)


def test_the_environment_reaches_the_resources_and_the_plain_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"LAKE_S3_REGION": "eu-west-1", "LAKE_S3_PORT": "9444", "LAKE_ICEBERG_WAREHOUSE": "wh",
                        "SAIL_MODE": "local-cluster", "SAIL_CLUSTER__WORKER_INITIAL_COUNT": "2",
                        "LAKE_SPARK_REMOTE": "sc://127.0.0.1:15002", "LAKE_TIME_TRAVEL_HOURS": "5"}.items():
        monkeypatch.setenv(name, value)
    settings = LakeSettings.from_env()
    storage = StorageResource.from_settings(settings)
    assert (storage.region, storage.embedded_port, storage.embedded_port_fallback, storage.warehouse) \
        == ("eu-west-1", 9444, False, "wh")  # a port that was set is that port or a failure
    assert storage.storage().model_dump() == LakeStorage.from_settings(settings).model_dump()
    engine = SparkEngine.from_settings(settings)
    assert (engine.engine, engine.remote, engine.sail_mode, engine.sail_workers) \
        == ("remote", "sc://127.0.0.1:15002", "local-cluster", 2)
    assert engine.config().sail.environment()["SAIL_CLUSTER__WORKER_INITIAL_COUNT"] == "2"
    assert LakeRules.from_settings(settings).time_travel_hours == 5
    assert StorageSettings().region == "us-east-1" and not StorageSettings().endpoint  # the defaults, once


def test_the_sensors_list_the_embedded_store_faster_than_a_billed_one(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LAKE_S3_ENDPOINT", "LAKE_SENSOR_INTERVAL_SECONDS", "LAKE_SENSOR_WAIT_SECONDS"):
        monkeypatch.delenv(name, raising=False)
    embedded = LakeSettings.from_env()
    assert (embedded.sensor_interval_seconds, embedded.sensor_wait_seconds) == (0.25, 4.25)
    monkeypatch.setenv("LAKE_S3_ENDPOINT", "https://s3.eu-west-1.amazonaws.com")
    assert LakeSettings.from_env().sensor_interval_seconds == 1.0  # every LIST is a billed request there
    monkeypatch.setenv("LAKE_SENSOR_INTERVAL_SECONDS", "0.5")
    assert LakeSettings.from_env().sensor_interval_seconds == 0.5


def test_the_webserver_port_is_3000_one_asked_for_or_any_free_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from lake_assets.cli.dev import _web_port
    from lake_assets.core.errors import UsageError
    from lake_assets.resources.ports import port_free

    monkeypatch.delenv("LAKE_WEB_PORT", raising=False)
    assert (LakeSettings.from_env().web_port, LakeSettings.from_env().web_port_explicit) == (3000, False)
    monkeypatch.setenv("LAKE_WEB_PORT", "0")  # tests and scripts: a free port, read from lake dev's first line
    assert LakeSettings.from_env().web_port == 0
    chosen = _web_port(0, explicit=True)
    assert chosen > 0 and port_free(chosen)
    assert _web_port(chosen, explicit=True) == chosen
    monkeypatch.setenv("LAKE_WEB_PORT", "65536")
    with pytest.raises(UsageError, match="LAKE_WEB_PORT=65536 is not a TCP port"):
        LakeSettings.from_env()
