"""A command that used Spark Connect exits only after the client's pending releases are done.

PySpark releases finished executions from daemon threads; one still in a gRPC call when the
interpreter finalizes aborted `lake run` (exit -6) after its work was done.
"""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

PROCESS = textwrap.dedent("""
    import pathlib, sys, time
    from pysail.spark import SparkConnectServer
    from pyspark.sql.connect.client.reattach import ExecutePlanResponseReattachableIterator
    from lake_assets.resources.spark import SparkConfig
    from lake_assets.resources.storage import LakeStorage

    server = SparkConnectServer(ip="127.0.0.1", port=0)
    server.start(background=True)
    host, port = server.listening_address
    storage = LakeStorage(bucket="unused", home=sys.argv[2]).with_endpoint("http://127.0.0.1:9")
    session = SparkConfig(engine="remote", remote=f"sc://{host}:{port}").session(storage)
    assert session.range(3).count() == 3

    def late_release():  # what a release queued by the last query looks like, only slower
        time.sleep(1)
        assert session.version  # a gRPC call from the pool's daemon thread (as a release makes)
        pathlib.Path(sys.argv[1]).write_text("released")

    ExecutePlanResponseReattachableIterator._release_thread_pool.apply_async(late_release)
""")


def test_pending_releases_finish_before_the_process_exits(tmp_path: Path) -> None:
    marker = tmp_path / "released"
    done = subprocess.run([sys.executable, "-c", PROCESS, str(marker), str(tmp_path / "home")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert marker.read_text() == "released", "the process exited with a release still in flight"
