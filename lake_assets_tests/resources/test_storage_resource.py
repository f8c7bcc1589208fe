"""The storage resource owns one lease on the embedded server per run, and the engine resource one
session per run; the lease is released when the run ends, the session is not handed out again."""

from pathlib import Path

import dagster as dg
from pyspark.sql import SparkSession

from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.s3_supervisor import LEASE_DIR
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource


def _leases(home: str) -> set[str]:
    return {path.name for path in (Path(home) / LEASE_DIR).glob("*.lease")}


def test_every_step_of_a_run_shares_one_lease_released_at_the_end(storage: LakeStorage) -> None:
    before = _leases(storage.home)
    seen: list[tuple[int, frozenset[str]]] = []

    @dg.op
    def first(resource: StorageResource) -> None:
        for _ in range(2):
            with resource.running() as running:
                running.put_bytes("probe/first", b"1")
                seen.append((id(running), frozenset(_leases(storage.home))))

    @dg.op(ins={"after": dg.In(dg.Nothing)})
    def second(resource: StorageResource) -> None:
        with resource.running() as running:
            assert running.get_bytes("probe/first")[0] == b"1"
            seen.append((id(running), frozenset(_leases(storage.home))))

    @dg.job(executor_def=dg.in_process_executor)
    def two_steps() -> None:
        second(after=first())

    resource = StorageResource(**LakeStorage(bucket=storage.bucket, home=storage.home).model_dump())
    result = two_steps.execute_in_process(resources={"resource": resource})

    assert result.success
    assert len({identity for identity, _ in seen}) == 1  # one resolved storage for the whole run
    assert len({leases for _, leases in seen}) == 1  # ... and one lease, taken once
    (during,) = {leases for _, leases in seen}
    assert len(during - before) == 1
    assert _leases(storage.home) == before  # released when the run ended


def test_outside_a_run_each_block_holds_its_own_lease(storage: LakeStorage) -> None:
    before = _leases(storage.home)
    resource = StorageResource(**LakeStorage(bucket=storage.bucket, home=storage.home).model_dump())
    with resource.running():
        assert len(_leases(storage.home) - before) == 1
    assert _leases(storage.home) == before


def test_every_step_of_a_run_shares_one_engine_session_of_its_own(storage: LakeStorage) -> None:
    seen: list[SparkSession] = []

    @dg.op
    def first(resource: StorageResource, engine: SparkEngine) -> None:
        with resource.running() as running:
            for _ in range(2):
                seen.append(engine.session(running))
                assert engine.session(running).sql("SELECT 1 AS one").collect()[0].one == 1

    @dg.op(ins={"after": dg.In(dg.Nothing)})
    def second(resource: StorageResource, engine: SparkEngine) -> None:
        with resource.running() as running:
            seen.append(engine.session(running))

    @dg.job(executor_def=dg.in_process_executor)
    def two_steps() -> None:
        second(after=first())

    resources = {"resource": StorageResource(**LakeStorage(bucket=storage.bucket, home=storage.home).model_dump()),
                 "engine": SparkEngine()}
    assert two_steps.execute_in_process(resources=resources).success
    (run_session,) = {id(session) for session in seen}  # one session for every step of the run
    assert two_steps.execute_in_process(resources=resources).success
    assert id(seen[-1]) != run_session  # the next run has its own
    shared = SparkEngine().session(storage)  # outside a run: the process's session, untouched by the runs
    assert id(shared) not in {id(session) for session in seen}
    assert shared.sql("SELECT 2 AS two").collect()[0].two == 2
