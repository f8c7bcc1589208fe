"""An embedded Sail server gets its own settings (the catalog list, the mode) for its start only,
and the S3 variables for the process: Sail's object store reads them when a query reaches a bucket."""

import io
import os
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from lake_assets.resources.spark import start_sail_server
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import SailSettings


def test_the_catalog_variables_are_scoped_to_the_start_and_still_serve(storage: LakeStorage) -> None:
    buffer = io.BytesIO()
    pq.write_table(pa.table({"x": [1, 2, 3]}), buffer)
    storage.put_bytes("probe/x.parquet", buffer.getvalue())
    sail_before = {name: value for name, value in os.environ.items() if name.startswith("SAIL_")}
    server = start_sail_server(storage, SailSettings())
    sessions: list[SparkSession] = []
    try:
        assert {name: value for name, value in os.environ.items() if name.startswith("SAIL_")} == sail_before
        assert os.environ["AWS_ENDPOINT"] == storage.endpoint_url  # read later, by the object store
        host, port = server.listening_address
        for _ in range(2):  # a later session (a new run) as well as the first
            spark = SparkSession.builder.remote(f"sc://{host}:{port}").config("spark.sql.session.timeZone",
                                                                             "UTC").create()
            sessions.append(spark)
            assert spark.read.parquet(storage.uri("probe/x.parquet")).count() == 3
            namespace = f"probe_{uuid.uuid4().hex[:8]}"
            spark.sql(f"CREATE NAMESPACE lake.{namespace}")  # the catalog list was read at the start
            assert namespace in {row[0] for row in spark.sql("SHOW NAMESPACES IN lake").collect()}
            spark.sql(f"DROP NAMESPACE lake.{namespace}")
    finally:
        # closed while their server runs: a client closed after it (at garbage collection)
        # retries its pending execution releases against nothing, for minutes
        for spark in sessions:
            spark.stop()
        server.stop()
