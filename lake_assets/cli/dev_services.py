"""`lake dev`'s Dagster services: what `dagster dev` runs, with the webserver behind a token.

Dagster OSS has no authentication: its webserver runs every GraphQL mutation (launch a run,
restore a table, turn a sensor off) for whoever reaches its port, and on 127.0.0.1 that is
every local user (one unauthenticated POST launched `restore_table_job`). `dagster dev`
(dagster 1.13.27, `dagster/_cli/dev.py`) starts `python -m dagster_webserver` with only a
host and a port, so nothing can be put in front of the app it serves. `lake dev` therefore
starts the same three services itself, the way `dagster dev` does: one code server for the
workspace (Dagster's `ProxyServerManager`, on an owner-only unix socket), the daemon
(`python -m dagster._daemon run` against it, stopped through its shutdown pipe), and the
webserver's own ASGI app (`create_app_from_workspace_process_context`, what
`dagster-webserver` serves) wrapped in `cli/web_token.py`'s `TokenGate` and served by uvicorn
in this process on 127.0.0.1.

Run as `python -m lake_assets.cli.dev_services --port P --token-file F [--log-level L] WORKSPACE`.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import uvicorn

#: dagster-webserver's defaults (`dagster_webserver/cli.py`): statement timeout ms, pool recycle s, overflow.
WEBSERVER_DB_SETTINGS = (15000, 3600, 20)
#: How often the UI polls for fresh asset data (dagster dev's default), in ms.
LIVE_DATA_POLL_MS = 2000
DAEMON_STOP_SECONDS = 60


def main(workspace: Path, port: int, token: str, log_level: str) -> int:
    import uvicorn
    import yaml
    from dagster import DagsterInstance
    from dagster._cli.proxy_server_manager import ProxyServerManager
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster._utils.log import configure_loggers
    from dagster_shared.ipc import get_ipc_shutdown_pipe, open_ipc_subprocess, send_ipc_shutdown_message
    from dagster_shared.serdes import serialize_value
    from dagster_webserver.app import create_app_from_workspace_process_context
    from dagster_webserver.version import __version__

    from lake_assets.cli.web_token import TokenGate

    os.environ["DAGSTER_IS_DEV_CLI"] = "1"  # as `dagster dev` sets it (shorter code-location errors)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a stop unwinds this process, as Ctrl-C does
    configure_loggers(formatter="colored", log_level=log_level.upper())
    instance = DagsterInstance.get()
    with ProxyServerManager(instance, WorkspaceFileTarget(paths=[str(workspace)]), log_level) as code_servers, \
            tempfile.TemporaryDirectory(prefix="lake-dev-") as scratch:
        served = Path(scratch) / "workspace.yaml"  # the code server's socket, for the daemon and the webserver
        served.write_text(yaml.dump({"load_from": code_servers.get_code_server_specs()}))
        read_fd, write_fd = get_ipc_shutdown_pipe()
        daemon = open_ipc_subprocess(
            [sys.executable, "-m", "dagster._daemon", "run", "--log-level", log_level, "--log-format", "colored",
             "--shutdown-pipe", str(read_fd), "--instance-ref", serialize_value(instance.get_ref()),
             "--code-server-log-level", log_level, "--workspace", str(served)],
            pass_fds=[read_fd])
        try:
            instance.optimize_for_webserver(*WEBSERVER_DB_SETTINGS)
            with WorkspaceProcessContext(instance, version=__version__, read_only=False,
                                         workspace_load_target=WorkspaceFileTarget(paths=[str(served)]),
                                         code_server_log_level=log_level) as context:
                app = create_app_from_workspace_process_context(context, "", LIVE_DATA_POLL_MS)
                server = uvicorn.Server(uvicorn.Config(TokenGate(app, token, port), host="127.0.0.1", port=port,
                                                       log_level="warning"))
                threading.Thread(target=_stop_with, args=(daemon, server), daemon=True).start()
                server.run()
                return 0 if daemon.poll() is None else 1
        except KeyboardInterrupt:
            return 0
        finally:
            send_ipc_shutdown_message(write_fd)
            try:
                daemon.wait(timeout=DAEMON_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                daemon.kill()


def _stop_with(daemon: subprocess.Popen, server: "uvicorn.Server") -> None:
    """Stop the webserver when the daemon exits (`dagster dev` stops both then, too)."""
    code = daemon.wait()
    if code != 0:  # a stop ends the daemon with 0
        print(f"lake dev: the Dagster daemon exited with code {code}; stopping", file=sys.stderr, flush=True)
    server.should_exit = True


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m lake_assets.cli.dev_services")
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-file", type=Path, required=True)
    parser.add_argument("--log-level", default="warning")
    arguments = parser.parse_args()
    sys.exit(main(arguments.workspace, arguments.port, arguments.token_file.read_text().strip(), arguments.log_level))
