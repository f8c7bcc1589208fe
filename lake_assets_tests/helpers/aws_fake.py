"""A local stand-in for AWS Glue's and EMR Serverless's Spark workers, beside moto's AWS API.

No AWS is reachable here. moto (a local AWS API server) answers the Glue and EMR Serverless calls
the orchestrator makes (StartJobRun, GetJobRun, GetApplication, ...) and records the runs, but it
cannot run Spark. `LocalJobRunner` plays the part of the service's workers: hooked on the boto3
session the orchestrator's clients come from (botocore's documented event system), it sees each
StartJobRun that moto accepted, reads the job the way the service would (Glue: the job's definition
from moto, its script location and arguments; EMR Serverless: the run's entry point, `--py-files`
and the driver environment the Pipes client set), fetches the script and the lake's code from the
lake's bucket, and runs the script with them as a local Python process, to its end, before the
StartJobRun call returns to the Pipes client. Its Spark is the `SPARK_REMOTE` session given (no
Delta Lake jar exists for a local JVM here), and its S3 credentials come from its environment, as a
job's IAM role gives them.

Every boto3 call the job's process makes is recorded (`job_calls`: a `sitecustomize` beside the job
registers a botocore event handler on boto3's default session; it observes, it changes nothing),
so the tests can check the calls against the job role's IAM policy, and so are the modules it imported
(to check that the job needs no package beyond those it is given).

Real: the lake's code and script as uploaded, Dagster Pipes both ways (context and messages through
the lake's bucket), the apply on a Spark engine, the AWS API calls and their parameters (as moto
validates them). Faked: that Glue / EMR Serverless launch the job (this class), and the run's state
(moto reports it finished when polled).
"""

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from lake_assets.resources.storage import LakeStorage


#: The job process's `sitecustomize`: records each boto3 call (service:Operation), and the top-level modules
#: the job imported (beyond those its interpreter had loaded at start), into JOB_CALLS_FILE at exit.
CALL_RECORDER = """
import sys
_started = set(sys.modules)
import atexit, json, os
import boto3

_calls = []
boto3.setup_default_session()
boto3.DEFAULT_SESSION.events.register(
    "before-call", lambda model, **_: _calls.append(f"{model.service_model.signing_name}:{model.name}"))


def _write():
    modules = sorted({name.split(".")[0] for name in set(sys.modules) - _started})
    with open(os.environ["JOB_CALLS_FILE"], "w") as out:
        json.dump({"calls": _calls, "modules": modules}, out)


atexit.register(_write)
"""


@dataclass
class LocalJobRunner:
    """Runs the jobs started through `session`'s clients as local processes (see the module)."""

    session: boto3.Session
    storage: LakeStorage  # the lake's bucket, where the job's code was uploaded
    spark_remote: str  # the Spark Connect URL the job's SparkSession.builder.getOrCreate() reaches
    workdir: Path
    glue: Any  # a Glue client on moto, to read the job's definition as Glue does
    runs: list[subprocess.CompletedProcess] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # every AWS API call made through `session`: service:Operation
    job_calls: list[str] = field(default_factory=list)  # every boto3 call the jobs' processes made: service:Operation
    job_modules: set[str] = field(default_factory=set)  # the top-level modules the jobs imported

    def __post_init__(self) -> None:
        events = self.session.events
        events.register("before-parameter-build.glue.StartJobRun", self._keep_params)
        events.register("before-parameter-build.emr-serverless.StartJobRun", self._keep_params)
        events.register("after-call.glue.StartJobRun", self._run_glue)
        events.register("after-call.emr-serverless.StartJobRun", self._run_emr)
        events.register("before-call", self._record)

    def _record(self, model: Any, **_: Any) -> None:
        self.calls.append(f"{model.service_model.signing_name}:{model.name}")

    @staticmethod
    def _keep_params(params: dict, context: dict, **_: Any) -> None:
        context["lake_start_params"] = json.loads(json.dumps(params))

    def _run_glue(self, context: dict, http_response: Any, **_: Any) -> None:
        if http_response.status_code != 200:
            return
        params = context["lake_start_params"]
        job = self.glue.get_job(JobName=params["JobName"])["Job"]
        arguments = {**job.get("DefaultArguments", {}), **params.get("Arguments", {})}
        script = self._fetch(job["Command"]["ScriptLocation"])
        package = self._fetch(arguments["--extra-py-files"])
        argv = [part for pair in arguments.items() for part in pair]
        self._run(script, package, argv, {})

    def _run_emr(self, context: dict, http_response: Any, **_: Any) -> None:
        if http_response.status_code != 200:
            return
        submit = context["lake_start_params"]["jobDriver"]["sparkSubmit"]
        options = shlex.split(submit.get("sparkSubmitParameters", ""))
        confs = [options[i + 1] for i, option in enumerate(options) if option == "--conf"]
        driver_env = dict(conf.removeprefix("spark.emr-serverless.driverEnv.").split("=", 1) for conf in confs
                          if conf.startswith("spark.emr-serverless.driverEnv."))
        package = self._fetch(options[options.index("--py-files") + 1])
        self._run(self._fetch(submit["entryPoint"]), package, submit.get("entryPointArguments", []), driver_env)

    def _fetch(self, uri: str) -> Path:
        bucket, key = uri.removeprefix("s3://").split("/", 1)
        assert bucket == self.storage.bucket, uri
        path = self.workdir / key.rsplit("/", 1)[-1]
        path.write_bytes(self.storage.get_bytes(key)[0])
        return path

    def _run(self, script: Path, package: Path, argv: list[str], env: dict[str, str]) -> None:
        key, secret = self.storage.credentials()
        environment = {name: value for name, value in os.environ.items()
                       if not name.startswith(("AWS_", "LAKE_", "DAGSTER_", "SPARK_"))}
        environment.update(env, SPARK_REMOTE=self.spark_remote,
                           AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)  # the job's role, here
        recorder, calls = self.workdir / "recorder", self.workdir / "calls.json"
        recorder.mkdir(exist_ok=True)
        (recorder / "sitecustomize.py").write_text(CALL_RECORDER)
        environment.update(PYTHONPATH=f"{package}{os.pathsep}{recorder}", JOB_CALLS_FILE=str(calls))
        self.runs.append(subprocess.run([sys.executable, str(script), *argv], env=environment, cwd=self.workdir,
                                        capture_output=True, text=True, timeout=600))
        if calls.exists():
            recorded = json.loads(calls.read_text())
            self.job_calls.extend(recorded["calls"])
            self.job_modules.update(recorded["modules"])
