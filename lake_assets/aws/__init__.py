"""The declared tables' apply step as a Spark job on AWS Glue or EMR Serverless (LAKE_ENGINE=glue,
emr-serverless), through dagster-aws's Pipes clients.

- `job.py`: the job's entry point, run by Glue or EMR Serverless on their Spark (no Dagster in it:
  `dagster-pipes` only);
- `code.py`: the job script and the lake's code as the job receives them, uploaded to the lake's bucket;
- `launch.py`: the orchestrator's side (Dagster, dagster-aws: the `aws` extra), which uploads them,
  starts the run, waits, and turns the job's report into the assets' metadata.
"""

from collections.abc import Callable
from typing import Any

from lake_assets.core.errors import UsageError


def apply_job_launcher() -> Callable[..., Any]:
    """`launch.run_apply_job`, or a one-line error where the `aws` extra (dagster-aws) is not installed."""
    try:
        from lake_assets.aws.launch import run_apply_job
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] != "dagster_aws":
            raise
        raise UsageError("LAKE_ENGINE=glue and emr-serverless need the `aws` extra: uv sync --extra aws") from error
    return run_apply_job
