"""The storage resource owns one lease on the embedded server, one S3 client and one Iceberg catalog
per run, and the engine resource one session per run; the lease is released and the clients are
closed when the run ends, the session is not handed out again."""

from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import dagster as dg
import pytest
from pyiceberg.catalog.rest import RestCatalog
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

    resource = StorageResource(bucket=storage.bucket, home=storage.home)
    result = two_steps.execute_in_process(resources={"resource": resource})

    assert result.success
    assert len({identity for identity, _ in seen}) == 1  # one resolved storage for the whole run
    assert len({leases for _, leases in seen}) == 1  # ... and one lease, taken once
    (during,) = {leases for _, leases in seen}
    assert len(during - before) == 1
    assert _leases(storage.home) == before  # released when the run ended


def test_outside_a_run_each_block_holds_its_own_lease(storage: LakeStorage) -> None:
    before = _leases(storage.home)
    resource = StorageResource(bucket=storage.bucket, home=storage.home)
    with dg.build_resources({"storage": resource}) as built:  # what a sensor gets: set up without a run
        assert _leases(storage.home) == before  # ... so no lease is taken for it
        with built.storage.running():
            assert len(_leases(storage.home) - before) == 1
    assert _leases(storage.home) == before


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the S3 clients (by service) and pyiceberg REST catalogs made, by wrapping the real constructors."""
    counts: Counter[str] = Counter()
    real_client, real_catalog = boto3.client, RestCatalog.__init__

    def client(service: str, *args: Any, **kwargs: Any) -> Any:
        counts[service] += 1
        return real_client(service, *args, **kwargs)

    def catalog(self: RestCatalog, *args: Any, **kwargs: Any) -> None:
        counts["catalog"] += 1
        real_catalog(self, *args, **kwargs)

    monkeypatch.setattr(boto3, "client", client)
    monkeypatch.setattr(RestCatalog, "__init__", catalog)
    return counts


def test_a_run_makes_one_s3_client_and_one_catalog_closed_when_it_ends(storage: LakeStorage,
                                                                      made: Counter[str]) -> None:
    seen: list[tuple[LakeStorage, Any, Any, dict[str, str]]] = []

    def use(resource: StorageResource) -> None:
        for _ in range(2):
            with resource.running() as running:
                running.put_bytes("probe/object", b"1")
                assert [o["Key"] for o in running.list_objects("probe/")] == ["probe/object"]
                catalog = running.catalog().pyiceberg()
                catalog.create_namespace_if_not_exists("probe")
                seen.append((running, running.get_client(), catalog, running.delta_storage_options()))

    @dg.op
    def first(resource: StorageResource) -> None:
        use(resource)

    @dg.op(ins={"after": dg.In(dg.Nothing)})
    def second(resource: StorageResource) -> None:
        use(resource)

    @dg.job(executor_def=dg.in_process_executor)
    def two_steps() -> None:
        second(after=first())

    resources = {"resource": StorageResource(bucket=storage.bucket, home=storage.home)}
    for run in range(2):  # two runs in one process, as `lake run` executes its jobs
        made.clear()
        assert two_steps.execute_in_process(resources=resources).success
        # one S3 client, one table-bucket check and one REST catalog for every use in every step of the run
        assert made == {"s3": 1, "s3tables": 1, "catalog": 1}
        this_run = seen[4 * run:]
        assert len(this_run) == 4
        for index in range(4):  # the storage, its client, its catalog and its delta-rs options
            assert len({id(uses[index]) for uses in this_run}) == 1
        running = this_run[0][0]
        for call in (running.get_client, running.catalog):  # nothing of the run outlives it
            with pytest.raises(RuntimeError, match="after close"):
                call()
    assert seen[0][0] is not seen[4][0] and seen[0][1] is not seen[4][1]  # the second run had its own


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

    resources = {"resource": StorageResource(bucket=storage.bucket, home=storage.home),
                 "engine": SparkEngine()}
    assert two_steps.execute_in_process(resources=resources).success
    (run_session,) = {id(session) for session in seen}  # one session for every step of the run
    assert two_steps.execute_in_process(resources=resources).success
    assert id(seen[-1]) != run_session  # the next run has its own
    shared = SparkEngine().session(storage)  # outside a run: the process's session, untouched by the runs
    assert id(shared) not in {id(session) for session in seen}
    assert shared.sql("SELECT 2 AS two").collect()[0].two == 2
