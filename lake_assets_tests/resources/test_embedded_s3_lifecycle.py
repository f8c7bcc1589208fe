"""One lifecycle for the embedded S3 server: shared by concurrent users, started once, stopped
by its last user or, when every user was SIGKILLed, by its supervisor; no sockets left behind."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

import lake_assets.resources.embedded_s3 as embedded_s3_module
from lake_assets.resources.embedded_s3 import EmbeddedS3, embedded_s3, free_port, running_server
from lake_assets.core.processes import pid_alive
from lake_assets.resources.s3_supervisor import STATE_FILE, server_lock
from lake_assets.settings import embedded_credentials

pytestmark = pytest.mark.integration  # each test starts embedded S3 servers


@pytest.fixture(autouse=True)
def _no_credentials_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "LAKE_S3_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


class User:
    """A subprocess holding a lease on the server under `home` (see s3_user.py)."""

    def __init__(self, home: Path, port: int) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        self.process = subprocess.Popen([sys.executable, "-m", "lake_assets_tests.resources.s3_user", str(home),
                                         str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def attached(self) -> tuple[int, str]:
        line = self.process.stdout.readline().split()
        assert line, f"user exited with {self.process.wait()}"
        return int(line[0]), line[1]

    def finish(self) -> None:
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0


def _wait_until(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _weed_processes(data_dir: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmdline and cmdline[0].endswith(b"weed") and f"-dir={data_dir}".encode() in cmdline and pid_alive(int(proc.name)):
                pids.append(int(proc.name))
    return pids


def _s3_works(endpoint: str, home: Path) -> bool:
    key, secret = embedded_credentials(home)
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
                          region_name="us-east-1")
    client.list_buckets()
    return True


def _server_gone(home: Path, server: EmbeddedS3) -> bool:
    return (not pid_alive(server.pid) and not pid_alive(server.supervisor_pid)
            and not (home / STATE_FILE).exists() and not any(Path(s).exists() for s in server.sockets))


def test_the_first_user_leaving_does_not_stop_the_server_another_uses(tmp_path: Path) -> None:
    first = User(tmp_path, free_port())
    pid, endpoint = first.attached()
    second = User(tmp_path, free_port())
    assert second.attached() == (pid, endpoint)
    server = running_server(tmp_path)
    first.finish()  # the starter leaves while the second still uses the server
    assert pid_alive(pid) and _s3_works(endpoint, tmp_path)
    second.finish()  # the last user out has it stopped (its supervisor stops weed and cleans up)
    assert _wait_until(lambda: _server_gone(tmp_path, server)), "weed, its supervisor or its sockets outlived the users"


def test_users_starting_together_share_one_server(tmp_path: Path) -> None:
    users = [User(tmp_path, free_port()) for _ in range(3)]
    attached = {user.attached() for user in users}
    assert len(attached) == 1, attached
    assert len(_weed_processes(tmp_path / "s3")) == 1
    for user in users:
        user.finish()
    assert _wait_until(lambda: _weed_processes(tmp_path / "s3") == [])


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_server_stops_when_its_only_user_is_killed(tmp_path: Path, sig: signal.Signals) -> None:
    user = User(tmp_path, free_port())
    user.attached()
    server = running_server(tmp_path)
    assert server is not None and all(Path(s).exists() for s in server.sockets[:2])
    user.process.send_signal(sig)
    user.process.wait(timeout=30)
    assert _wait_until(lambda: _server_gone(tmp_path, server)), "weed, its supervisor or its sockets outlived the user"


def test_a_user_right_after_the_last_one_waits_for_the_stopping_server_and_gets_a_fresh_one(tmp_path: Path) -> None:
    """The last user out does not wait for weed's shutdown (about a second): it moves the state
    file aside and signals the supervisor. Nobody may attach to the stopping server; the next
    start waits until it is gone (same data directory, same S3 port), then starts its own."""
    port = free_port()
    first = User(tmp_path, port)
    pid, _ = first.attached()
    server = running_server(tmp_path)
    first.finish()
    assert running_server(tmp_path) is None  # the stopping server is not offered to anyone
    again = User(tmp_path, port)
    new_pid, endpoint = again.attached()
    assert new_pid != pid and not pid_alive(pid) and not pid_alive(server.supervisor_pid)
    assert _weed_processes(tmp_path / "s3") == [new_pid] and _s3_works(endpoint, tmp_path)
    assert endpoint.endswith(f":{port}")  # the old server's port was free again: no fallback
    fresh = running_server(tmp_path)
    again.finish()
    assert fresh is not None and _wait_until(lambda: _server_gone(tmp_path, fresh))


def test_weed_dies_with_its_supervisor(tmp_path: Path) -> None:
    user = User(tmp_path, free_port())
    pid, _ = user.attached()
    server = running_server(tmp_path)
    os.kill(server.supervisor_pid, signal.SIGKILL)
    assert _wait_until(lambda: not pid_alive(pid)), "weed outlived its SIGKILLed supervisor"
    user.finish()
    # the next user finds the dead server's state, clears it and starts a fresh one
    again = User(tmp_path, free_port())
    new_pid, endpoint = again.attached()
    assert new_pid != pid and _s3_works(endpoint, tmp_path)
    assert not any(Path(s).exists() for s in server.sockets[2:])  # the dead server's /tmp sockets
    again.finish()


def test_state_file_names_every_port(tmp_path: Path) -> None:
    user = User(tmp_path, free_port())
    user.attached()
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert {"s3", "iceberg", "filer", "master", "volume"} <= set(state["ports"])
    assert oct((tmp_path / STATE_FILE).stat().st_mode & 0o777) == "0o600"
    user.finish()


def test_attaching_with_other_keys_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lake_assets.core.errors import EmbeddedS3Error
    from lake_assets.resources.embedded_s3 import embedded_s3
    from lake_assets.settings import S3Credentials

    user = User(tmp_path, free_port())
    user.attached()
    with pytest.raises(EmbeddedS3Error, match="accepts the key"):
        with embedded_s3(tmp_path, free_port(), S3Credentials("someone-else", "another-secret")):
            pass
    assert running_server(tmp_path) is not None  # the failed attach did not disturb the server
    user.finish()


def test_a_server_whose_starter_was_killed_before_recording_it_is_stopped_by_the_next_start(tmp_path: Path) -> None:
    """A `lake run` SIGKILLed while its server starts leaves weed holding the data directory (the
    filer's leveldb lock) and no state file: the next start must stop it, not fail on the lock."""
    credentials = embedded_credentials(tmp_path)
    with server_lock(tmp_path):
        orphan = embedded_s3_module._start(tmp_path, free_port(), credentials, True)
    (tmp_path / STATE_FILE).unlink()  # as if its starter died before recording it
    assert pid_alive(orphan.pid) and running_server(tmp_path) is None
    with embedded_s3(tmp_path, free_port(), credentials) as server:
        assert server.pid != orphan.pid
        assert not pid_alive(orphan.pid) and not pid_alive(orphan.supervisor_pid)
        assert _s3_works(server.endpoint, tmp_path)


def test_a_start_runs_the_callers_work_while_weed_boots_and_an_attach_does_not(tmp_path: Path) -> None:
    """`while_starting` (a command's imports) runs once weed is launched and before it answers, so
    a cold command overlaps the two; a command attaching to a live server has nothing to wait for."""
    credentials = embedded_credentials(tmp_path)
    seen: list[tuple[bool, bool]] = []  # (weed launched, recorded as answering) when the work ran

    def work() -> None:
        seen.append((bool(_weed_processes(tmp_path / "s3")), running_server(tmp_path) is not None))

    with embedded_s3(tmp_path, free_port(), credentials, while_starting=work) as server:
        assert seen == [(True, False)]
        with embedded_s3(tmp_path, free_port(), credentials, while_starting=work) as attached:
            assert attached.pid == server.pid
        assert seen == [(True, False)] and _s3_works(server.endpoint, tmp_path)
    assert _wait_until(lambda: _server_gone(tmp_path, server))


def test_a_server_stopping_in_a_deleted_home_leaves_the_new_start_at_the_same_path_alone(tmp_path: Path) -> None:
    """LAKE_HOME deleted and made again while its server stops (about a second): the old
    supervisor's clean-up must not remove the run directory and sockets of the new start there."""
    home = tmp_path / "home"
    with embedded_s3(home, free_port(), embedded_credentials(home)) as old:
        pass  # the last user out: the supervisor stops weed and cleans up, nobody waits
    os.rename(home, tmp_path / "deleted")  # as `rm -rf`, without racing the stopping weed's last writes
    home.mkdir(mode=0o700)
    credentials = embedded_credentials(home)
    with embedded_s3(home, free_port(), credentials) as new:
        assert pid_alive(old.supervisor_pid), "the old server stopped before the new start: nothing was tested"
        assert _wait_until(lambda: not pid_alive(old.supervisor_pid))
        assert Path(new.run_dir).is_dir() and Path(new.sockets[0]).exists(), "the old supervisor removed them"
        client = boto3.client("s3", endpoint_url=new.endpoint, aws_access_key_id=credentials.access_key_id,
                              aws_secret_access_key=credentials.secret_access_key, region_name="us-east-1")
        client.create_bucket(Bucket="after")
        client.put_object(Bucket="after", Key="k", Body=b"still here")
        assert client.get_object(Bucket="after", Key="k")["Body"].read() == b"still here"
    assert _wait_until(lambda: _server_gone(home, new))


def test_each_start_gets_its_own_owner_only_run_dir_and_clears_those_no_server_uses(tmp_path: Path) -> None:
    """A start's run directory is new (a stopping server's supervisor removes only its own);
    those of earlier starts (a SIGKILLed supervisor removes nothing) go once no server is left."""
    leftover = tmp_path / "s3-run" / "r-killed"
    leftover.mkdir(parents=True)
    (leftover / "filer.sock").touch()
    credentials = embedded_credentials(tmp_path)
    with embedded_s3(tmp_path, free_port(), credentials) as first:
        run_dir = Path(first.run_dir)
        assert run_dir.parent == tmp_path / "s3-run" and not leftover.exists()
        assert all(path.stat().st_mode & 0o777 == 0o700 for path in (run_dir, run_dir.parent))
    assert _wait_until(lambda: _server_gone(tmp_path, first)) and not run_dir.exists()
    with embedded_s3(tmp_path, free_port(), credentials) as second:
        assert second.run_dir != first.run_dir and Path(second.sockets[0]).exists()


def test_a_weed_that_does_not_stop_is_killed_after_its_grace(tmp_path: Path) -> None:
    """weed's volume server sometimes never finishes its shutdown; the next command waited out
    the whole stop timeout (15 s) for it. A real weed cannot be made to hang on demand, so the
    supervisor here runs a stand-in that ignores SIGTERM, as such a weed does."""
    from lake_assets.resources.s3_supervisor import STOP_TIMEOUT_SECONDS, WEED_STOP_GRACE_SECONDS

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    state = {"run_dir": str(run_dir), "sockets": [], "data_dir": str(tmp_path / "data")}
    (tmp_path / "data").mkdir()
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "lake_assets.resources.s3_supervisor", str(tmp_path), json.dumps(state), "--",
         sys.executable, "-c", stubborn], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)
    weed_pid = int(supervisor.stdout.readline())
    supervisor.stdout.close()
    time.sleep(0.5)  # the stand-in has set its handler
    asked = time.monotonic()
    supervisor.send_signal(signal.SIGTERM)
    supervisor.wait(timeout=STOP_TIMEOUT_SECONDS + 10)
    took = time.monotonic() - asked
    assert not pid_alive(weed_pid)
    assert WEED_STOP_GRACE_SECONDS - 0.5 < took < WEED_STOP_GRACE_SECONDS + 3 < STOP_TIMEOUT_SECONDS
    assert not run_dir.exists()  # and it cleaned up after it
