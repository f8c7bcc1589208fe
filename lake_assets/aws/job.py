"""The AWS job's entry point: apply one declared table's pending raw objects on the job's Spark.

Glue runs this file as its job script (`python lake_apply_job.py --k v ...`), EMR Serverless as the
entry point of `spark-submit`; the lake's code comes with it (`--extra-py-files` / `--py-files`,
lake_assets/aws/code.py). It opens Dagster Pipes (the context and the messages in the lake's bucket,
`PipesS3ContextLoader` / `PipesS3MessageWriter`), reads what to do from the context's extras (the
declaration, the rules, whether to reapply), builds the platform's SparkSession
(`SparkSession.builder.getOrCreate()`: a classic JVM session with Delta Lake on Glue and EMR; a Spark
Connect one where `SPARK_REMOTE` is set), runs `apply_pending` (core/apply/run.py, which writes the
tables, the quarantine, the feed, the history and the ledger), and reports the run's report back as
a Pipes custom message. A failure the lake understands is reported as one line, then raised, so the
platform marks the run failed.

S3 credentials come from the AWS default chain (the job's IAM role), never from an argument.
"""

import argparse
import sys
from collections.abc import Sequence

from dagster_pipes import (
    PipesCliArgsParamsLoader,
    PipesEnvVarParamsLoader,
    PipesParamsLoader,
    PipesS3ContextLoader,
    PipesS3MessageWriter,
    open_dagster_pipes,
)

from lake_assets.core.apply.report_json import report_to_json
from lake_assets.core.apply.run import IngestRules, apply_pending
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.errors import LakeError
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import RulesSettings

#: How often the job uploads its buffered Pipes messages.
MESSAGE_INTERVAL_SECONDS = 2.0
#: The Pipes custom message keys: one of them per run.
REPORT, ERROR = "report", "error"


def arguments() -> argparse.ArgumentParser:
    """The job's own arguments (the platforms add theirs, e.g. Glue's --JOB_ID: those are ignored)."""
    parser = argparse.ArgumentParser(prog="lake_apply_job", add_help=False)
    parser.add_argument("--lake-s3-endpoint", required=True, help="the lake's S3 endpoint URL")
    parser.add_argument("--lake-s3-bucket", required=True, help="the lake's bucket")
    parser.add_argument("--lake-s3-region", required=True, help="the lake bucket's region")
    return parser


def params_loader(argv: Sequence[str]) -> PipesParamsLoader:
    """Glue passes the Pipes bootstrap parameters as job arguments; EMR Serverless in the driver's environment."""
    return PipesCliArgsParamsLoader() if "--dagster-pipes-context" in argv else PipesEnvVarParamsLoader()


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    known, _ = arguments().parse_known_args(argv)
    storage = LakeStorage(endpoint=known.lake_s3_endpoint, bucket=known.lake_s3_bucket, region=known.lake_s3_region,
                          credential_chain=True).with_endpoint(known.lake_s3_endpoint)
    client = storage.get_client()
    with open_dagster_pipes(params_loader=params_loader(argv), context_loader=PipesS3ContextLoader(client),
                            message_writer=PipesS3MessageWriter(client, interval=MESSAGE_INTERVAL_SECONDS)) as pipes:
        extras = pipes.extras
        declaration = TableDeclaration.model_validate(extras["declaration"])
        rules = IngestRules.from_rules(RulesSettings.model_validate(extras["rules"]))
        from pyspark.sql import SparkSession  # the platform's PySpark (Glue's and EMR's own)

        spark = SparkSession.builder.appName(f"lake-apply-{declaration.name}").getOrCreate()
        pipes.log.info(f"applying {declaration.name} on Spark {spark.version}")
        try:
            report = apply_pending(declaration, storage, spark, pipes.run_id, rules, bool(extras["reapply"]),
                                   list(extras.get("reload") or ()))
        except LakeError as error:
            pipes.report_custom_message({ERROR: f"{type(error).__name__}: {error}"})
            raise
        pipes.report_custom_message({REPORT: report_to_json(report)})
        pipes.log.info(f"{declaration.name}: {len(report.files)} file(s), version {report.version_before} -> "
                       f"{report.version_after}, rows {report.rows_before} -> {report.rows_after}")


if __name__ == "__main__":
    main()
