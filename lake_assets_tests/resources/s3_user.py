"""A stand-in for a `lake` command that uses the embedded S3 server, for lifecycle tests.

`python -m lake_assets_tests.resources.s3_user HOME PORT` leases the server under HOME
through the real `embedded_s3`, prints `<weed pid> <endpoint>`, then holds the lease until
its stdin closes (or it is killed). SIGTERM unwinds like the CLI does (cleanup runs).
"""

import signal
import sys
from pathlib import Path

from lake_assets.resources.embedded_s3 import embedded_s3
from lake_assets.settings import embedded_credentials


def main(home: Path, port: int) -> None:
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        with embedded_s3(home, port, embedded_credentials(home)) as server:
            print(server.pid, server.endpoint, flush=True)
            sys.stdin.read()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
