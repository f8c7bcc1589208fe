"""`lake engine serve`: a Sail Spark Connect server configured for this lake, for `LAKE_ENGINE=remote`.

The one step that gives a Sail server elsewhere (another terminal, another process, a
bigger machine) the lake's S3 and Iceberg REST catalog: the server runs in this command's
process with the environment `resources/spark.sail_server_environment` builds (the same the
embedded engine uses), so no secret is printed or put on a command line. The process also
keeps the catalog's bearer-token file fresh and holds the embedded S3 server (if that is
the lake's store) for as long as it serves. Sail's own settings (`SAIL_MODE`, worker counts)
come from the environment, as for the embedded engine.
"""

import threading
from typing import Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import console
from lake_assets.cli.session import lake_session

engine_app = typer.Typer(help="The Spark engine: serve this lake's Sail engine for other processes.",
                         no_args_is_help=True)
app.add_typer(engine_app, name="engine")


@engine_app.command()
@friendly
def serve(
    ip: Annotated[str, typer.Option(help="address to bind; 0.0.0.0 serves other machines (the network is "
                                         "then trusted: Spark Connect has no authentication)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on (Spark Connect's usual 15002; 0: a free port)",
                                      min=0, max=65535)] = 15002,
) -> None:
    """Run a Sail Spark Connect server for this lake until Ctrl-C; other processes use it with
    LAKE_SPARK_REMOTE=sc://HOST:PORT (which selects LAKE_ENGINE=remote)."""
    from lake_assets.core.errors import EngineUnavailable
    from lake_assets.resources.spark import start_sail_server

    with lake_session() as lake:
        sail = lake.settings.spark.sail
        try:
            server = start_sail_server(lake.storage, sail, ip=ip, port=port)
        except OSError as error:  # pysail: the address is taken or cannot be bound
            raise EngineUnavailable(f"the Sail server could not listen on {ip}:{port}: {error}") from None
        host, bound = server.listening_address
        workers = f", {sail.sail_workers or 'Sail default'} workers" if sail.sail_mode != "local" else ""
        console.print(f"Sail ({sail.sail_mode}{workers}) serving s3://{lake.storage.bucket} "
                      f"(S3 {lake.storage.endpoint_url}) on sc://{host}:{bound}", soft_wrap=True)
        console.print(f"use it: LAKE_SPARK_REMOTE=sc://{host}:{bound} lake run   (Ctrl-C stops the server)",
                      soft_wrap=True)
        try:
            threading.Event().wait()  # until Ctrl-C or SIGTERM (`friendly` turns both into KeyboardInterrupt)
        finally:
            server.stop()
