"""A command running a Dagster job in process shows the step the run is in, as it runs."""

import time
import uuid

import dagster as dg

from lake_assets.cli.job_runner import showing_steps
from lake_assets_tests.helpers.progress import RecordingProgress


@dg.op
def extract() -> int:
    time.sleep(0.5)
    return 1


@dg.op
def load(value: int) -> int:
    time.sleep(0.5)
    return value


@dg.job
def two_steps() -> None:
    load(extract())


def test_the_step_in_progress_is_reported_while_the_run_executes(tmp_path) -> None:
    recorder = RecordingProgress()
    run_id = str(uuid.uuid4())
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        with showing_steps(instance, run_id, "two_steps", recorder, poll_seconds=0.05):
            assert two_steps.execute_in_process(instance=instance, run_id=run_id).success
    assert [d for d, _ in recorder.steps] == [
        "two_steps: starting the run", "two_steps: extract (0 step(s) done)", "two_steps: load (1 step(s) done)"]
