"""A benchmark's own lake: a temporary LAKE_HOME with its embedded S3 server on a free port.

The lake's variables are set in this process's environment for the block (so the code
under test finds this lake, not the user's) and restored after; the home is removed.
"""

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lake_assets.resources.embedded_s3 import EmbeddedS3
    from lake_assets.resources.storage import LakeStorage

#: Variables that would point the code at another lake or engine; cleared for the block.
LAKE_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "LAKE_S3_ENDPOINT", "LAKE_SPARK_REMOTE", "LAKE_ENGINE",
                  "LAKE_S3_BUCKET", "LAKE_HOME", "LAKE_S3_PORT")


@contextlib.contextmanager
def private_lake(prefix: str, bucket: str = "lake") -> Iterator[tuple[Path, "EmbeddedS3"]]:
    """(LAKE_HOME, its running embedded S3 server) for the block."""
    from lake_assets.core.environment import environment
    from lake_assets.resources.embedded_s3 import embedded_s3, free_port
    from lake_assets.settings import embedded_credentials

    home = Path(tempfile.mkdtemp(prefix=prefix))
    port = free_port()
    try:
        with environment(dict.fromkeys(LAKE_VARIABLES)), \
                embedded_s3(home, port, embedded_credentials(home)) as server, \
                environment({"LAKE_HOME": str(home), "LAKE_S3_PORT": str(port), "LAKE_S3_BUCKET": bucket}):
            yield home, server
    finally:
        shutil.rmtree(home, ignore_errors=True)


def storage_and_engine(endpoint: str) -> tuple["LakeStorage", "SparkSession"]:
    """The lake's storage at `endpoint` (its bucket made) and an engine session on it, started
    before anything is timed (the engine's start is not what a benchmark measures)."""
    from lake_assets.resources.engine import SparkEngine
    from lake_assets.resources.storage import LakeStorage
    from lake_assets.settings import LakeSettings

    settings = LakeSettings.from_env()
    storage = LakeStorage.from_settings(settings).with_endpoint(endpoint)
    storage.ensure_bucket()
    spark = SparkEngine.from_settings(settings).session(storage)
    spark.sql("SELECT 1").collect()
    return storage, spark
