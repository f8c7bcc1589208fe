"""The declared tables' apply step as a Spark job on AWS Glue or EMR Serverless (LAKE_ENGINE=glue,
emr-serverless), through dagster-aws's Pipes clients.

- `job.py`: the job's entry point, run by Glue or EMR Serverless on their Spark (no Dagster in it:
  `dagster-pipes` only);
- `code.py`: the job script and the lake's code as the job receives them, uploaded to the lake's bucket;
- `launch.py`: the orchestrator's side (Dagster, dagster-aws: the `aws` extra), which uploads them,
  starts the run, waits, and turns the job's report into the assets' metadata.
"""
