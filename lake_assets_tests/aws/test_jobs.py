"""The declared tables' apply step as an AWS Glue / EMR Serverless job, through dagster-aws's Pipes clients.

No AWS is reachable from here, so AWS is faked: moto's server (on a free 127.0.0.1 port) answers
the Glue and EMR Serverless API the orchestrator calls, and a local stand-in for the services'
workers (helpers/aws_fake.py, which says exactly what is real and what is not) runs the job script
the orchestrator uploaded, with the lake's code it uploaded, when moto accepts a StartJobRun. The
job reaches Spark through `SparkSession.builder.getOrCreate()` on the session's Sail server
(`SPARK_REMOTE`): Delta Lake's jars are on no package registry, so no local JVM Spark here can write
the tables. The lake's bucket is the session's real S3 server.

One lake applies the seed's full load and CDC files on its own engine (the embedded run), another
through each AWS job; their tables must hold the same rows (read by delta-rs) and their assets the
same counts, with the job run's id added.
"""

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import dagster as dg
import pytest
from moto.server import ThreadedMotoServer

from lake_assets.aws.code import requirements
from lake_assets.core.tables import LEDGER, table_set
from lake_assets.declared.assets import table_assets
from lake_assets.resources.embedded_s3 import EmbeddedS3
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.ports import free_port
from lake_assets.resources.rules import LakeRules
from lake_assets.resources.spark import _sail_url
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.settings import SailSettings
from lake_assets_tests.conftest import DATA
from lake_assets_tests.helpers.aws_fake import LocalJobRunner
from lake_assets_tests.helpers.iam_policy import allowed_actions, iam_action
from lake_assets_tests.helpers.job_packages import PLATFORM, allowed_distributions, unprovided
from lake_assets_tests.helpers.insurance import INSURANCE
from lake_assets_tests.helpers.lakes import Lake, assert_same_tables, drop, new_lake

REGION = "us-east-1"
GLUE_JOB = "lake-apply"
#: Metadata that differs between any two runs, or names the lake's bucket.
RUN_METADATA = {"duration_seconds", "table_uri", "source_files", "commits"}


@pytest.fixture(scope="module")
def aws_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def lakes(s3_server: EmbeddedS3, lake_home: Path) -> Iterator[tuple[Lake, Lake]]:
    embedded, aws = new_lake(s3_server, lake_home, "embedded"), new_lake(s3_server, lake_home, "aws")
    for lake in (embedded, aws):
        for path in sorted(DATA.rglob("*.csv")):
            lake.storage.put_bytes(f"raw/{path.relative_to(DATA).as_posix()}", path.read_bytes())
    yield embedded, aws
    drop(embedded)
    drop(aws)


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="lake-aws-job-"))
    yield path
    shutil.rmtree(path)


def _materialize(lake: Lake, engine: SparkEngine) -> dg.ExecuteInProcessResult:
    storage = StorageResource(bucket=lake.storage.bucket, home=lake.storage.home)
    return dg.materialize([table_assets(INSURANCE)], instance=dg.DagsterInstance.ephemeral(), raise_on_error=False,
                          resources={"storage": storage, "engine": engine, "rules": LakeRules()})


def _metadata(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    return {m.asset_key.path[-1]: {k: v.value for k, v in m.metadata.items()}
            for m in result.asset_materializations_for_node(f"{INSURANCE.name}_tables")}


def _runner(aws_endpoint: str, aws: Lake, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> LocalJobRunner:
    """The fake's workers on a fresh boto3 default session (the orchestrator's clients come from it)."""
    session = boto3.Session(region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", session)  # moto's key pair; the lake's S3 keeps its own
    glue = _test_client("glue", aws_endpoint)
    return LocalJobRunner(session, aws.storage, _sail_url(aws.storage, SailSettings()), workdir, glue)


def _test_client(service: str, aws_endpoint: str) -> Any:
    """A client for the test's own calls to moto (its own session: the runner does not record them)."""
    session = boto3.Session(region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    return session.client(service, endpoint_url=aws_endpoint)


def _compare(embedded: Lake, aws: Lake, applied: dict[str, dict], reference: dict[str, dict]) -> None:
    tables = table_set(INSURANCE)
    names = [t.name for t in (tables.table, tables.quarantine, tables.changes, tables.history, tables.tombstones)]
    assert assert_same_tables(aws, embedded, [*names, LEDGER.name]) == {*names, LEDGER.name}
    for asset, values in reference.items():
        assert {k: v for k, v in applied[asset].items() if k in values and k not in RUN_METADATA} == \
               {k: v for k, v in values.items() if k not in RUN_METADATA}, asset
    table, expected = applied[INSURANCE.name], reference[INSURANCE.name]
    assert table["rows_after"] > 0 and table["rows_quarantined"] > 0, table  # the job read the seed's rows
    assert table["source_files"] == expected["source_files"]


def _assert_within_policies(runner: LocalJobRunner) -> None:
    """Every AWS call the orchestrator's process made (its AWS clients, the lake's S3, and here also the engine's
    reader, in this process) is allowed by deploy/aws/orchestrator-policy.json, every call of the job's process
    by deploy/aws/job-policy.json. delta-rs and Sail reach S3 from Rust (not recorded): GetObject, PutObject,
    ListBucket and DeleteObject, which both policies allow on the lake's bucket."""
    assert runner.job_calls, "the job's calls were not recorded"
    orchestrator = {iam_action(call) for call in runner.calls}
    assert orchestrator - allowed_actions("orchestrator-policy.json") == set(), sorted(orchestrator)
    job = {iam_action(call) for call in runner.job_calls}
    assert job - allowed_actions("job-policy.json") == set(), sorted(job)


def _assert_job_imports_only_what_it_is_given(runner: LocalJobRunner) -> None:
    """The job imported no installed package beyond the platform's, the ones the lake passes it, and their
    requirements (the lake's own code comes in the uploaded zip, though the venv also has it installed)."""
    assert {"pyspark", "deltalake", "dagster_pipes"} <= runner.job_modules, runner.job_modules
    allowed = allowed_distributions([*PLATFORM, *requirements()]) | {"lake"}
    assert unprovided(runner.job_modules, allowed) == set(), sorted(runner.job_modules)


def test_a_glue_job_applies_the_table_as_the_embedded_engine_does(
        lakes: tuple[Lake, Lake], aws_endpoint: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    embedded, aws = lakes
    reference = _materialize(embedded, SparkEngine())
    assert reference.success
    runner = _runner(aws_endpoint, aws, workdir, monkeypatch)
    runner.glue.create_job(Name=GLUE_JOB, Role="arn:aws:iam::123456789012:role/lake-job", GlueVersion="5.0",
                           Command={"Name": "glueetl", "PythonVersion": "3",
                                    "ScriptLocation": aws.storage.uri("jobs/code/lake_apply_job.py")})

    result = _materialize(aws, SparkEngine(engine="glue", aws_endpoint=aws_endpoint, aws_poll_seconds=0.5))

    assert [run.returncode for run in runner.runs] == [0], [run.stderr[-3000:] for run in runner.runs]
    assert result.success
    applied = _metadata(result)
    _compare(embedded, aws, applied, _metadata(reference))
    assert applied[INSURANCE.name]["AWS Glue Job Name"] == GLUE_JOB
    assert applied[INSURANCE.name]["AWS Glue Job Run ID"].startswith("jr_")
    assert {"glue:StartJobRun", "glue:GetJobRun"} <= set(runner.calls), runner.calls
    _assert_within_policies(runner)
    _assert_job_imports_only_what_it_is_given(runner)
    # each run's Pipes context and messages are gone; the code stays for the next run
    assert aws.storage.list_objects("jobs/pipes/") == []
    assert {o["Key"].rsplit("/", 1)[-1].split("-")[0] for o in aws.storage.list_objects("jobs/code/")} == \
           {"lake_apply_job.py", "lake_assets"}


def test_an_emr_serverless_job_applies_the_table_as_the_embedded_engine_does(
        lakes: tuple[Lake, Lake], aws_endpoint: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    embedded, aws = lakes
    reference = _materialize(embedded, SparkEngine())
    assert reference.success
    runner = _runner(aws_endpoint, aws, workdir, monkeypatch)
    emr = _test_client("emr-serverless", aws_endpoint)
    application = emr.create_application(name="lake", releaseLabel="emr-7.5.0", type="SPARK")["applicationId"]

    result = _materialize(aws, SparkEngine(engine="emr-serverless", aws_endpoint=aws_endpoint, aws_poll_seconds=0.5,
                                           emr_application_id=application,
                                           emr_job_role_arn="arn:aws:iam::123456789012:role/lake-job"))

    assert [run.returncode for run in runner.runs] == [0], [run.stderr[-3000:] for run in runner.runs]
    assert result.success
    applied = _metadata(result)
    _compare(embedded, aws, applied, _metadata(reference))
    assert applied[INSURANCE.name]["AWS EMR Serverless Application ID"] == application
    runs = emr.list_job_runs(applicationId=application)["jobRuns"]
    assert [r["id"] for r in runs] == [applied[INSURANCE.name]["AWS EMR Serverless Job Run ID"]]
    assert {"emr-serverless:StartJobRun", "emr-serverless:GetJobRun"} <= set(runner.calls), runner.calls
    _assert_within_policies(runner)
    _assert_job_imports_only_what_it_is_given(runner)
