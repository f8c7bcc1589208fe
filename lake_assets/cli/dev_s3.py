"""`lake dev`'s watch on the embedded S3 server: one that dies is reported at once and started again.

`lake dev` holds a lease on the server for its whole life. When `weed` dies (killed, crashed),
its supervisor cleans up and exits, and nothing started it again until the next command
needed it: under `lake dev` the sensors and runs failed meanwhile without a word, and the
supervisor, a child of `lake dev`, stayed a zombie. `lake dev` calls `check()` at every poll.
"""

from pathlib import Path

from lake_assets.core.processes import pid_alive
from lake_assets.resources.embedded_s3 import EmbeddedS3, restart, running_server
from lake_assets.resources.s3_supervisor import LOG_FILE
from lake_assets.resources.storage import LakeStorage


class S3Watch:
    """Looks at the embedded server `storage` runs on; starts it again when it is gone."""

    def __init__(self, storage: LakeStorage) -> None:
        self._storage = storage
        self._home = Path(storage.home)
        self._server: EmbeddedS3 | None = running_server(self._home) if storage.embedded else None

    def gone(self) -> EmbeddedS3 | None:
        """The server, if it has stopped since the last look (None while it runs, or for an external S3)."""
        if self._server is None:
            return None
        pid_alive(self._server.supervisor_pid)  # reaps the supervisor if it was our child and has exited
        current = running_server(self._home)
        if current is None:
            return self._server
        self._server = current  # alive, or started again by another command meanwhile
        return None

    def start_again(self) -> EmbeddedS3:
        """The server started again (or the one another command started meanwhile)."""
        self._server = restart(self._home, self._storage.embedded_port, self._storage.credentials(),
                               fallback=self._storage.embedded_port_fallback)
        return self._server

    @property
    def log(self) -> Path:
        return self._home / LOG_FILE
