"""The TPC-DS assets, checks, sensor and schedule through Dagster, on the real S3 server and Sail."""

import datetime as dt
import time

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from lake_assets.core.ledger import Ledger
from lake_assets.definitions import defs
from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.rules import LakeRules
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.tpcds.assets import CORRECTIONS_KEY, QUARANTINE_KEY, TPCDS_ASSETS, WEB_SALES_KEY, asset_key
from lake_assets.tpcds.checks import TPCDS_CHECKS, evaluate_referential_integrity, evaluate_rows_match_raw
from lake_assets.jobs.tpcds import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from lake_assets.tpcds.schema import DIMENSIONS, RAW, TpcdsTable, date_sk, ledger_name
from lake_assets.sensors.tpcds import tpcds_sensor
from lake_assets_tests.helpers.tpcds import generated, land_dimensions, land_facts, sold_dates

WEB_SALES = ledger_name(TpcdsTable.WEB_SALES)


def _tick(storage: LakeStorage, cursor: str | None):
    resource = StorageResource(bucket=storage.bucket, home=storage.home)
    with dg.build_sensor_context(cursor=cursor, resources={"storage": resource}) as context:
        return tpcds_sensor()(context)


def _run(storage: LakeStorage, instance: dg.DagsterInstance, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
    job = defs.resolve_job_def("load_tpcds")
    resources = {"storage": StorageResource(bucket=storage.bucket, home=storage.home), "engine": SparkEngine(),
                 "rules": LakeRules()}
    return dg.materialize([*TPCDS_ASSETS, *TPCDS_CHECKS], instance=instance, resources=resources,
                          selection=request.asset_selection, tags=request.tags, run_config=request.run_config,
                          raise_on_error=False) \
        if job else None


def test_definitions_hold_the_tpcds_domain() -> None:
    job = defs.resolve_job_def("load_tpcds")
    assert job.tags["lake/table"] == "tpcds"
    keys = job.asset_layer.asset_graph.get_all_asset_keys()
    assert {WEB_SALES_KEY, CORRECTIONS_KEY, QUARANTINE_KEY, *(asset_key(d) for d in DIMENSIONS)} <= set(keys)
    web_sales = defs.resolve_assets_def(WEB_SALES_KEY)
    assert web_sales.backfill_policy == dg.BackfillPolicy.single_run()
    days = [d for d in sold_dates(generated(0.01)) if d is not None]  # dsdgen's data, the oracle
    first, last = web_sales.partitions_def.get_first_partition_key(), web_sales.partitions_def.get_last_partition_key()
    assert first == "1998-01-02" and first <= days[0].isoformat()
    assert last == days[-1].isoformat() == "2003-01-02"  # the calendar ends where the data ends
    assert defs.resolve_sensor_def("raw_tpcds_sensor").minimum_interval_seconds <= 5
    assert defs.resolve_schedule_def("tpcds_nightly").cron_schedule == "0 2 * * *"


def test_sensor_starts_one_run_per_tick_for_every_new_object(storage: LakeStorage, catalog: LakeCatalog) -> None:
    oracle = generated(0.01)
    assert not _tick(storage, None).run_requests
    days = sold_dates(oracle)
    land_dimensions(storage, oracle)
    land_facts(storage, oracle, [days[5], days[2], days[9], None])
    storage.put_bytes(f"{RAW.corrections}20240101-000000000.dat", b"D" + b"|" * 34 + b"\n")

    first = _tick(storage, None)
    assert len(first.run_requests) == 1
    request = first.run_requests[0]
    assert set(request.asset_selection) == {*(asset_key(d) for d in DIMENSIONS), WEB_SALES_KEY, CORRECTIONS_KEY,
                                            QUARANTINE_KEY}
    assert request.tags[ASSET_PARTITION_RANGE_START_TAG] == days[2].isoformat()
    assert request.tags[ASSET_PARTITION_RANGE_END_TAG] == days[9].isoformat()
    assert request.tags["lake/table"] == "tpcds"

    assert not _tick(storage, first.cursor).run_requests  # nothing new since
    time.sleep(1.1)
    land_facts(storage, oracle, [days[20], days[21]])
    second = _tick(storage, first.cursor)
    assert len(second.run_requests) == 1  # still one run: everything pending, days 2..21 as one range
    assert second.run_requests[0].tags[ASSET_PARTITION_RANGE_END_TAG] == days[21].isoformat()


def test_a_run_of_what_is_pending_loads_only_the_new_days_of_its_range(
        storage: LakeStorage, catalog: LakeCatalog, spark: SparkSession) -> None:
    """The sensor's request covers its first to its last new day. Found under `lake dev`: while
    `lake tpcds generate` uploaded, the sensor requested three runs; the third re-loaded the
    497 days the second had loaded (a second overwrite of the whole table). A request run
    after another run took its days in loads nothing; a range around a day loaded before
    leaves that day as it was, and takes a day landed in it since; a backfill (no
    `pending_only`) still re-loads the whole range."""
    oracle = generated(0.01)
    days = sold_dates(oracle)
    land_dimensions(storage, oracle)
    land_facts(storage, oracle, [days[0], days[4]])
    instance = dg.DagsterInstance.ephemeral()
    stale = _tick(storage, None).run_requests[0]  # days 0..4, requested now, run last
    assert stale.run_config == {"ops": {k.to_python_identifier(): {"config": {"reapply": False, "pending_only": True}}
                                        for k in stale.asset_selection if k != QUARANTINE_KEY}}
    land_facts(storage, oracle, [days[2]])
    first = _run(storage, instance, _tick(storage, None).run_requests[0])
    assert first.success  # days 0, 2 and 4

    # each day's partition shows its own object and rows, the run's totals are named as the run's
    per_day = {e.partition: {k: v.value for k, v in e.materialization.metadata.items()}
               for e in first.get_asset_materialization_events() if e.asset_key == WEB_SALES_KEY}
    assert set(per_day) == {(days[0] + dt.timedelta(n)).isoformat() for n in range((days[4] - days[0]).days + 1)}
    for day in (days[0], days[2], days[4]):
        lines = len(storage.get_bytes(f"{RAW.fact_folder(day)}part-00000.dat")[0].decode().splitlines())
        own = per_day[day.isoformat()]
        assert (own["objects"], own["rows_in_objects"]) == (1, lines), own
        assert own["rows_applied"] + own["rows_superseded"] + own["rows_quarantined"] == lines
        assert own["source_objects"] == [f"{RAW.fact_folder(day)}part-00000.dat"]
    empty = [m for d, m in per_day.items() if d not in {x.isoformat() for x in (days[0], days[2], days[4])}]
    assert empty and all(m["objects"] == m["rows_in_objects"] == 0 for m in empty)
    assert all(m["run_objects"] == 3 and "iceberg_snapshot" in m for m in per_day.values())

    def web_sales_entries() -> list[tuple]:
        return sorted((e["source_file"], e["table_version"]) for e in Ledger(storage).entries(WEB_SALES).to_pylist())

    def snapshot() -> int:
        return catalog.pyiceberg().load_table(WEB_SALES).current_snapshot().snapshot_id

    loaded, entries = snapshot(), web_sales_entries()
    assert len(entries) == 3
    assert _run(storage, instance, stale).success
    assert (snapshot(), web_sales_entries()) == (loaded, entries)  # nothing pending: no commit, no entry

    key = f"{RAW.fact_folder(days[2])}part-00000.dat"
    lines = storage.get_bytes(key)[0].decode().splitlines()
    storage.put_bytes(key, ("\n".join(lines[:-1]) + "\n").encode())  # day 2 re-delivered, one row less
    land_facts(storage, oracle, [days[6]])
    around = _tick(storage, None).run_requests[0]  # days 2..6, around day 4 (loaded before)
    assert (around.tags[ASSET_PARTITION_RANGE_START_TAG], around.tags[ASSET_PARTITION_RANGE_END_TAG]) == \
        (days[2].isoformat(), days[6].isoformat())
    land_facts(storage, oracle, [days[5]])  # after the request, in its range: new when the run runs
    assert _run(storage, instance, around).success
    applied = {e["source_file"]: e for e in Ledger(storage).latest(WEB_SALES).values()}
    assert {f: e["table_version"] for f, e in applied.items()} == {
        **{f"{RAW.fact_folder(d)}part-00000.dat": loaded for d in (days[0], days[4])},
        **{f"{RAW.fact_folder(d)}part-00000.dat": snapshot() for d in (days[2], days[5], days[6])}}
    assert applied[key]["rows_applied"] == len(lines) - 1

    backfill = dg.RunRequest(asset_selection=[WEB_SALES_KEY, QUARANTINE_KEY], tags=around.tags)
    assert _run(storage, instance, backfill).success
    latest = {e["source_file"]: e["table_version"] for e in Ledger(storage).latest(WEB_SALES).values()}
    assert {latest[f"{RAW.fact_folder(d)}part-00000.dat"] for d in days[2:7] if d != days[3]} == {snapshot()}


@pytest.mark.e2e
def test_one_run_loads_a_range_and_the_checks_pass_then_fail(
    storage: LakeStorage, catalog: LakeCatalog, spark: SparkSession
) -> None:
    oracle = generated(0.01)
    days = sold_dates(oracle)[:6] + [None]
    land_dimensions(storage, oracle)
    land_facts(storage, oracle, days)
    instance = dg.DagsterInstance.ephemeral()
    request = _tick(storage, None).run_requests[0]

    result = _run(storage, instance, request)
    assert result.success
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert {"web_sales_rows_match_raw", "web_sales_key_unique", "web_sales_referential_integrity",
            "web_sales_freshness", "web_sales_schema_matches", "web_sales_rows_accounted"} <= set(checks)
    assert all(c.passed for c in checks.values()), {n: c.metadata for n, c in checks.items() if not c.passed}
    loaded = spark.sql("SELECT count(*) AS n FROM tpcds.web_sales").collect()[0]["n"]
    expected = sum(1 for _ in oracle.sql("SELECT 1 FROM web_sales LEFT JOIN date_dim ON ws_sold_date_sk = d_date_sk "
                                         f"WHERE d_date IN ({', '.join(repr(str(d)) for d in days if d)}) "
                                         "OR ws_sold_date_sk IS NULL").fetchall())
    assert loaded == expected
    materialized = instance.get_materialized_partitions(WEB_SALES_KEY)
    assert {d.isoformat() for d in sold_dates(oracle)[:6]} <= materialized

    # unknown keys are counted and shown, the rows stay
    item = spark.sql("SELECT ws_item_sk FROM tpcds.web_sales LIMIT 1").collect()[0][0]
    spark.sql(f"DELETE FROM tpcds.item WHERE i_item_sk = {item}")
    ri = evaluate_referential_integrity(storage, SparkEngine())
    assert not ri.passed and ri.metadata["unknown_rows"].value >= 1
    assert item in ri.metadata["by_column"].value["ws_item_sk"]["examples"]
    assert spark.sql("SELECT count(*) AS n FROM tpcds.web_sales").collect()[0]["n"] == loaded

    # a duplicated key behind the loader's back fails the blocking key check, and the run (a key
    # of a day no later step re-delivers: a re-delivered day would MERGE both copies, and its
    # rows check would rightly count one row more than the object applied)
    spark.table("tpcds.web_sales").where(f"ws_sold_date_sk = {date_sk(days[2])}").limit(1) \
        .writeTo("tpcds.web_sales").append()
    key = f"{RAW.fact_folder(days[1])}part-00000.dat"
    lines = storage.get_bytes(key)[0].decode().splitlines()
    storage.put_bytes(key, ("\n".join(lines[:-1]) + "\n").encode())  # a re-delivery: one row less
    again = _run(storage, instance, _tick(storage, None).run_requests[0])
    failed = {c.check_name for c in again.get_asset_check_evaluations() if not c.passed}
    assert "web_sales_key_unique" in failed and not again.success

    # a quarantine row lost behind the ledger's back fails the rows check
    storage.put_bytes(f"{RAW.fact_folder(days[0])}part-00000.dat", b"broken line\n")
    load = _run(storage, instance, _tick(storage, None).run_requests[0])
    assert evaluate_rows_match_raw(storage, SparkEngine()).passed
    storage.delete_prefix("curated/web_sales_quarantine/")
    assert not evaluate_rows_match_raw(storage, SparkEngine()).passed
    assert load is not None
