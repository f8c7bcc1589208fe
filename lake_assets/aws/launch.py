"""The orchestrator's side of an AWS job: upload, start through dagster-aws's Pipes client, wait, report.

For one declared table's run (declared/assets.py, with LAKE_ENGINE=glue or emr-serverless): the job
script and the lake's code go to the lake's bucket (code.py); the run's Pipes context (the
declaration, the rules, whether to reapply) goes there too (`PipesS3ContextInjector`), and the job's
messages come back through it (`PipesS3MessageReader`, under LAKE_AWS_PIPES_PREFIX), while the run
goes on, on both services alike (Glue's CloudWatch log streams keep the driver's own output). The
job's report comes back as one Pipes custom message, from which the caller makes the same metadata
a run on the lake's own engine gets. The Glue or EMR Serverless job run's id (and Glue's console
URL) are added to it.

Needs the `aws` extra (dagster-aws). The AWS calls use the AWS default credential chain; the lake's
bucket is reached with the lake's own S3 settings.
"""

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster_aws.pipes import (
    PipesEMRServerlessClient,
    PipesGlueClient,
    PipesS3ContextInjector,
    PipesS3MessageReader,
)

from lake_assets.aws.code import UploadedCode, requirements, upload
from lake_assets.aws.job import ERROR, REPORT
from lake_assets.core.apply.report_json import report_from_json
from lake_assets.core.apply.run import ApplyReport
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.errors import JobFailed, UsageError
from lake_assets.resources.storage import LakeStorage, boto3_client
from lake_assets.settings import AwsJobSettings, RulesSettings

#: Delta Lake's SQL extension and catalog on the job's JVM Spark (MERGE INTO, `delta.` paths).
DELTA_SQL_CONF = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                  "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}
#: Where EMR 7's image keeps the Delta Lake jars.
EMR_DELTA_JARS = "/usr/share/aws/delta/lib/delta-spark.jar,/usr/share/aws/delta/lib/delta-storage.jar"


@dataclass(frozen=True)
class JobOutcome:
    """A finished job run: the core's report, and what the Pipes client says of the run (its id, URL)."""

    report: ApplyReport
    run_metadata: Mapping[str, Any]


class PrefixedS3MessageReader(PipesS3MessageReader):
    """dagster-aws's S3 message reader with each run's message chunks under `prefix` (it would put them
    at the bucket's root), remembering where (`key_prefix`) so they can be removed after the run."""

    def __init__(self, *, prefix: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prefix = prefix
        self.key_prefix: str | None = None

    @contextlib.contextmanager
    def get_params(self) -> Iterator[dict[str, Any]]:
        with super().get_params() as params:
            self.key_prefix = f"{self.prefix}{params['key_prefix']}"
            yield {**params, "key_prefix": self.key_prefix}


def run_apply_job(context: dg.AssetExecutionContext, engine: str, settings: AwsJobSettings,
                  declaration: TableDeclaration, storage: LakeStorage, rules: RulesSettings,
                  reapply: bool, reload: Sequence[str] = ()) -> JobOutcome:
    """Run `declaration`'s apply step as a Glue or EMR Serverless (`engine`) job; wait for it."""
    _check(engine, settings)
    code = upload(storage, settings.aws_code_prefix)
    extras = {"declaration": declaration.model_dump(mode="json"), "rules": rules.model_dump(mode="json"),
              "reapply": reapply, "reload": list(reload)}
    injector = PipesS3ContextInjector(bucket=storage.bucket, client=storage.get_client(),
                                      key_prefix=settings.aws_pipes_prefix)
    reader = PrefixedS3MessageReader(prefix=settings.aws_pipes_prefix, bucket=storage.bucket,
                                     client=storage.get_client(), interval=settings.aws_poll_seconds)
    client = _aws_client("glue" if engine == "glue" else "emr-serverless", settings, storage)
    try:
        if engine == "glue":
            invocation = PipesGlueClient(context_injector=injector, message_reader=reader, client=client).run(
                context=context, start_job_run_params=glue_run(settings, code, storage), extras=extras)
            what = f"Glue job {settings.glue_job_name}"
        else:
            invocation = PipesEMRServerlessClient(
                client=client, context_injector=injector, message_reader=reader,
                poll_interval=settings.aws_poll_seconds).run(
                context=context, start_job_run_params=emr_run(settings, code, storage, declaration), extras=extras)
            what = f"EMR Serverless application {settings.emr_application_id}"
    finally:
        if reader.key_prefix is not None:
            storage.delete_prefix(f"{reader.key_prefix}/")
    return JobOutcome(job_report(invocation.get_custom_messages(), what), dict(invocation.metadata))


def glue_run(settings: AwsJobSettings, code: UploadedCode, storage: LakeStorage) -> dict[str, Any]:
    """Glue's StartJobRun parameters (the Pipes client adds its bootstrap arguments)."""
    conf = " --conf ".join(f"{name}={value}" for name, value in DELTA_SQL_CONF.items())
    return {"JobName": settings.glue_job_name, "Arguments": {
        **_lake_arguments(storage),
        "--extra-py-files": code.package,
        "--additional-python-modules": ",".join(requirements()),
        "--datalake-formats": "delta",
        "--conf": conf,
    }}


def emr_run(settings: AwsJobSettings, code: UploadedCode, storage: LakeStorage,
            declaration: TableDeclaration) -> dict[str, Any]:
    """EMR Serverless's StartJobRun parameters (the Pipes client adds its bootstrap environment)."""
    conf = {"spark.jars": EMR_DELTA_JARS, **DELTA_SQL_CONF}
    if settings.emr_python_archive:
        python = "./environment/bin/python"
        conf.update({"spark.archives": f"{settings.emr_python_archive}#environment",
                     "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON": python,
                     "spark.emr-serverless.driverEnv.PYSPARK_PYTHON": python,
                     "spark.executorEnv.PYSPARK_PYTHON": python})
    submit = f"--py-files {code.package} " + " ".join(f"--conf {name}={value}" for name, value in conf.items())
    arguments = [part for pair in _lake_arguments(storage).items() for part in pair]
    return {"applicationId": settings.emr_application_id, "executionRoleArn": settings.emr_job_role_arn,
            "name": f"lake-apply-{declaration.name}",
            "jobDriver": {"sparkSubmit": {"entryPoint": code.script, "entryPointArguments": arguments,
                                          "sparkSubmitParameters": submit}}}


def job_report(messages: Sequence[Any], what: str) -> ApplyReport:
    """The report the job sent (its last custom message), or its one-line failure as `JobFailed`."""
    for message in reversed(messages):
        if isinstance(message, dict) and REPORT in message:
            return report_from_json(message[REPORT])
        if isinstance(message, dict) and ERROR in message:
            raise JobFailed(f"{what}: {message[ERROR]}")
    raise JobFailed(f"{what} reported no result: see the run's `[pipes]` events and the job run's logs")


def _lake_arguments(storage: LakeStorage) -> dict[str, str]:
    """Where the job finds the lake's bucket (no secret: the job's role gives it access)."""
    return {"--lake-s3-endpoint": storage.endpoint_url, "--lake-s3-bucket": storage.bucket,
            "--lake-s3-region": storage.region}


def _check(engine: str, settings: AwsJobSettings) -> None:
    if engine == "emr-serverless":
        missing = [name for name, value in (("LAKE_EMR_APPLICATION_ID", settings.emr_application_id),
                                            ("LAKE_EMR_JOB_ROLE_ARN", settings.emr_job_role_arn)) if not value]
        if missing:
            raise UsageError(f"LAKE_ENGINE=emr-serverless needs {' and '.join(missing)}")


def _aws_client(service: str, settings: AwsJobSettings, storage: LakeStorage) -> Any:
    return boto3_client(service, region_name=settings.aws_region or storage.region,
                        endpoint_url=settings.aws_endpoint or None)
