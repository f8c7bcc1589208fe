"""A second lake on the same machine just works: a taken default port moves the embedded S3
server to a free one (recorded where every client reads it), a port set explicitly is refused
naming its holder, and a port taken between our choice and weed's bind is retried."""

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import lake_assets.resources.embedded_s3 as embedded_s3_module
from lake_assets.core.errors import EmbeddedS3Error
from lake_assets.resources.embedded_s3 import embedded_s3
from lake_assets.resources.ports import free_port
from lake_assets.resources.s3_supervisor import LOG_FILE, STATE_FILE
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings

pytestmark = pytest.mark.integration  # each test starts embedded S3 servers


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port another program listens on (a plain socket, as another lake's server would)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))
        sock.listen()
        yield sock.getsockname()[1]


def put_and_get(storage: LakeStorage) -> bytes:
    storage.put_bytes("raw/cdcload/hello.csv", b"policy_id\n1\n")
    return storage.get_bytes("raw/cdcload/hello.csv")[0]


def test_a_taken_default_port_moves_the_server_to_a_free_one(tmp_path: Path, held_port: int,
                                                              capfd: pytest.CaptureFixture[str]) -> None:
    storage = LakeStorage(bucket="second-lake", home=str(tmp_path), embedded_port=held_port)
    with storage.running() as running:
        recorded = json.loads((tmp_path / STATE_FILE).read_text())
        assert running.endpoint_url == recorded["endpoint"] != f"http://127.0.0.1:{held_port}"
        assert put_and_get(running) == b"policy_id\n1\n"
        # every client reads the recorded endpoint: boto3, delta-rs, the engine's environment
        assert running.get_client().meta.endpoint_url == recorded["endpoint"]
        assert running.delta_storage_options()["AWS_ENDPOINT_URL"] == recorded["endpoint"]
        assert running.engine_environment()["AWS_ENDPOINT"] == recorded["endpoint"]
        assert LakeStorage(home=str(tmp_path), embedded_port=held_port).attached().endpoint_url == recorded["endpoint"]
    messages = [line for line in capfd.readouterr().err.splitlines() if f"port {held_port} is taken" in line]
    assert len(messages) == 1 and recorded["endpoint"] in messages[0], messages


def test_a_taken_port_set_in_lake_s3_port_is_refused_naming_its_holder(
        tmp_path: Path, held_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKE_HOME", str(tmp_path))
    monkeypatch.setenv("LAKE_S3_PORT", str(held_port))
    monkeypatch.delenv("LAKE_S3_ENDPOINT", raising=False)
    storage = LakeStorage.from_settings(LakeSettings.from_env())
    with pytest.raises(EmbeddedS3Error, match=rf"port {held_port} .*LAKE_S3_PORT.* taken by pid {__import__('os').getpid()}"):
        with storage.running():
            pass
    assert not (tmp_path / STATE_FILE).exists()


def test_an_internal_port_taken_before_weed_binds_it_is_retried(
        tmp_path: Path, held_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first start is given the held port for its master, as if another program took it between
    our choice and weed's bind; weed refuses it and the second start, on fresh ports, works."""
    chosen = []

    def first_choice_collides(s3_port: int) -> dict[str, int]:
        ports = choose(s3_port)
        if not chosen:
            ports["master"] = held_port
        chosen.append(ports)
        return ports

    choose = embedded_s3_module._choose_ports
    monkeypatch.setattr(embedded_s3_module, "_choose_ports", first_choice_collides)
    # the pair LakeStorage's clients use (the environment's, once an in-process engine has set it)
    credentials = LakeStorage(home=str(tmp_path)).credentials()
    with embedded_s3(tmp_path, free_port(), credentials) as server:
        assert len(chosen) == 2 and server.ports == chosen[1] and server.ports["master"] != held_port
        storage = LakeStorage(bucket="retried", home=str(tmp_path)).with_endpoint(server.endpoint)
        storage.ensure_bucket()
        assert put_and_get(storage) == b"policy_id\n1\n"
    assert f"{held_port}" in (tmp_path / LOG_FILE).read_text()


def test_two_lakes_starting_at_once_on_the_same_default_port_both_work(tmp_path: Path) -> None:
    port = free_port()
    started: list[LakeStorage] = []
    failures: list[BaseException] = []
    both_up, done = threading.Barrier(3, timeout=60), threading.Event()

    def lake(home: Path) -> None:
        try:
            with LakeStorage(bucket="race-lake", home=str(home), embedded_port=port).running() as running:
                started.append(running)
                assert put_and_get(running) == b"policy_id\n1\n"
                both_up.wait()
                done.wait(60)
        except BaseException as error:  # noqa: BLE001 - reported by the test thread
            failures.append(error)
            both_up.abort()

    threads = [threading.Thread(target=lake, args=(tmp_path / name,)) for name in ("one", "two")]
    for thread in threads:
        thread.start()
    try:
        both_up.wait()
    except threading.BrokenBarrierError:
        pass
    endpoints = {storage.endpoint_url for storage in started}
    done.set()
    for thread in threads:
        thread.join(60)
    assert failures == [] and len(endpoints) == 2, (failures, endpoints)
    assert f"http://127.0.0.1:{port}" in endpoints  # one got the default, the other moved
