"""The orchestrator's side of an AWS job, without AWS: the job's report or failure from its Pipes
messages, the settings it needs, and the StartJobRun parameters it builds."""

import shlex
import sys

import pytest

from lake_assets.aws import apply_job_launcher
from lake_assets.aws.code import UploadedCode, package_zip
from lake_assets.aws.launch import emr_run, glue_run, job_report, run_apply_job
from lake_assets.core.apply.report_json import report_to_json
from lake_assets.core.apply.run import ApplyReport
from lake_assets.core.errors import JobFailed, UsageError
from lake_assets.resources.spark import SparkConfig
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import AwsJobSettings, EngineSettings, RulesSettings
from lake_assets_tests.helpers.insurance import INSURANCE

CODE = UploadedCode("s3://lake/jobs/code/lake_apply_job.py", "s3://lake/jobs/code/lake_assets-0123.zip")


def test_the_jobs_report_is_its_last_custom_message() -> None:
    report = ApplyReport(run_id="r", version_before=None, rows_before=0, rows_after=3)
    assert job_report([{"other": 1}, {"report": report_to_json(report)}], "Glue job x") == report


def test_a_job_that_failed_in_the_lake_fails_with_its_one_line() -> None:
    with pytest.raises(JobFailed, match=r"^Glue job x: UsageError: bad rules$"):
        job_report([{"error": "UsageError: bad rules"}], "Glue job x")


def test_a_job_that_reported_nothing_fails_saying_where_to_look() -> None:
    with pytest.raises(JobFailed, match="reported no result"):
        job_report([], "EMR Serverless application a")


def test_emr_serverless_needs_its_application_and_role(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="LAKE_EMR_APPLICATION_ID and LAKE_EMR_JOB_ROLE_ARN"):
        run_apply_job(None, "emr-serverless", AwsJobSettings(), INSURANCE, LakeStorage(bucket="lake"),  # type: ignore[arg-type]
                      RulesSettings(), False)


def test_the_aws_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKE_ENGINE", "emr-serverless")
    monkeypatch.setenv("LAKE_AWS_CODE_PREFIX", "/deploy/code")
    monkeypatch.setenv("LAKE_EMR_APPLICATION_ID", "00abc")
    settings = EngineSettings.from_env()
    assert settings.on_aws and settings.aws.aws_code_prefix == "deploy/code/"
    assert settings.aws.emr_application_id == "00abc"


def test_the_glue_run_gets_the_code_the_delta_format_and_no_secret() -> None:
    storage = LakeStorage(bucket="lake", region="eu-west-1").with_endpoint("https://s3.eu-west-1.amazonaws.com")
    params = glue_run(AwsJobSettings(glue_job_name="apply"), CODE, storage)
    arguments = params["Arguments"]
    assert params["JobName"] == "apply" and arguments["--extra-py-files"] == CODE.package
    assert arguments["--datalake-formats"] == "delta" and arguments["--lake-s3-bucket"] == "lake"
    assert "dagster-pipes==" in arguments["--additional-python-modules"]
    assert not any("SECRET" in name.upper() or "KEY" in name.upper() for name in arguments)


def test_the_emr_run_submits_the_script_with_the_code_and_the_packed_environment() -> None:
    storage = LakeStorage(bucket="lake", region="eu-west-1").with_endpoint("https://s3.eu-west-1.amazonaws.com")
    settings = AwsJobSettings(emr_application_id="00abc", emr_job_role_arn="arn:aws:iam::1:role/job",
                              emr_python_archive="s3://lake/env.tar.gz")
    submit = emr_run(settings, CODE, storage, INSURANCE)["jobDriver"]["sparkSubmit"]
    options = shlex.split(submit["sparkSubmitParameters"])
    assert submit["entryPoint"] == CODE.script and options[options.index("--py-files") + 1] == CODE.package
    assert "spark.archives=s3://lake/env.tar.gz#environment" in options
    assert submit["entryPointArguments"][submit["entryPointArguments"].index("--lake-s3-bucket") + 1] == "lake"


def test_the_code_zip_is_the_same_bytes_for_the_same_files() -> None:
    assert package_zip() == package_zip()


def test_the_aws_engines_without_dagster_aws_say_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "lake_assets.aws.launch")
    monkeypatch.setitem(sys.modules, "dagster_aws.pipes", None)  # as if the `aws` extra were not installed
    with pytest.raises(UsageError, match=r"need the `aws` extra: uv sync --extra aws$"):
        apply_job_launcher()


def test_the_launcher_is_the_launch_modules_where_dagster_aws_is_installed() -> None:
    assert apply_job_launcher() is run_apply_job


def test_with_an_aws_engine_the_checks_and_queries_get_spark_connect_sessions() -> None:
    assert SparkConfig(engine="glue").session_engine == "sail"
    assert SparkConfig(engine="emr-serverless", remote="sc://spark:15002").session_engine == "remote"
    assert SparkConfig(engine="local").session_engine == "local"
