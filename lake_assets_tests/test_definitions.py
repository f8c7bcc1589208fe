"""The Dagster code location loads, and the apply job runs end to end with its checks."""

from collections import Counter

import dagster as dg
from deltalake import DeltaTable

from lake_assets.resources.rules import LakeRules
from lake_assets.definitions import defs
from lake_assets.declared.assets import table_assets, table_description
from lake_assets.declared.checks import table_checks
from lake_assets.core.registry import declaration
from lake_assets.core.tables import TableFormat
from lake_assets.declared import declared
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets_tests.conftest import DATA

INSURANCE = declaration("insurance")


def test_definitions_load_with_sensor_schedule_and_checks() -> None:
    dg.Definitions.validate_loadable(defs)
    job = defs.resolve_job_def("apply_insurance")
    assert {(c.asset_key.to_user_string(), c.name) for c in job.asset_layer.asset_graph.asset_check_keys} == {
        ("insurance", "schema_matches_contract"), ("insurance", "key_unique_not_null"),
        ("insurance", "row_count_reconciles"), ("insurance", "rows_conserved"),
        ("insurance_changes", "covers_table"), ("insurance_history", "matches_table"),
    }
    assert {"insurance_changes", "insurance_history"} <= {k.path[-1] for k in job.asset_layer.asset_graph.get_all_asset_keys()}
    assert defs.resolve_sensor_def("raw_insurance_sensor").minimum_interval_seconds <= 5
    assert defs.resolve_schedule_def("nightly_maintenance").cron_schedule == "0 3 * * *"
    assert job.tags["lake/table"] == "insurance"
    checks = {c.name: c.asset_key.to_user_string() for c in job.asset_layer.asset_graph.asset_check_keys}
    steps = {n.name for n in job.graph.node_defs} - {"insurance_tables"}
    assert steps == {f"{asset}_{check}" for check, asset in checks.items()}  # each step says asset and check once


def test_an_iceberg_tables_asset_is_under_its_catalog_namespace() -> None:
    """`shop.orders` in the catalog is `shop/orders` in Dagster (as the star's `tpcds/web_sales` is), so
    tables of one name in two namespaces are two assets; what is kept beside it, in Delta, keeps its name."""
    iceberg = INSURANCE.model_copy(update={"format": TableFormat.ICEBERG, "group": "shop"})
    made = declared(iceberg, poll_seconds=1, wait_seconds=0)
    tables = made.assets[-1]
    keys = {key.to_user_string() for key in tables.keys}
    assert keys == {"shop/insurance", "insurance_quarantine", "insurance_tombstones", "insurance_history"}
    assert tables.asset_deps[dg.AssetKey("insurance_history")] == {dg.AssetKey(["shop", "insurance"])}
    checks = {(c.asset_key.to_user_string(), c.name) for d in made.checks for c in d.check_keys}
    assert {("shop/insurance", "schema_matches_contract"), ("shop/insurance", "rows_conserved"),
            ("insurance_history", "matches_table")} <= checks
    assert all(asset in keys for asset, _ in checks)
    dg.Definitions.validate_loadable(dg.Definitions(assets=made.assets, asset_checks=made.checks, jobs=[made.job],
                                                    sensors=made.sensors, resources=defs.resources))


def test_a_partitioned_table_says_so_in_the_ui() -> None:
    partitioned = INSURANCE.model_copy(update={"partition_by": ("state_code",)})
    spec = next(s for s in table_assets(partitioned).specs if s.key.path == ["insurance"])
    assert spec.description.endswith("Partitioned by state_code.") and spec.metadata["partition_by"] == "state_code"
    unpartitioned = next(s for s in table_assets(INSURANCE).specs if s.key.path == ["insurance"])
    assert "Partitioned" not in unpartitioned.description and "partition_by" not in unpartitioned.metadata
    sources = tuple(s.model_copy(update={"partition": "state_code"}) if s.kind == "snapshot" else s
                    for s in INSURANCE.sources)
    by_state = next(s for s in table_assets(partitioned.model_copy(update={"sources": sources})).specs
                    if s.key.path == ["insurance"])
    # `<value>` escaped: the UI renders descriptions as markdown, which drops an unknown tag
    assert by_state.description.endswith("Each snapshot object replaces one state_code partition, named by its "
                                         "folder (state_code=&lt;value&gt;/); each value is a partition here too: "
                                         "materializing partitions loads their newest snapshots again, as "
                                         "`lake backfill --partition` does.")
    # Dagster's partitions: the table's, by the values; its quarantine, history and the rest whole
    assert by_state.partitions_def == dg.DynamicPartitionsDefinition(name="insurance_state_code")
    assert spec.partitions_def is None and unpartitioned.partitions_def is None


def test_the_description_names_what_the_sources_deliver() -> None:
    both = next(s for s in table_assets(INSURANCE).specs if s.key.path == ["insurance"]).description
    assert "full-load snapshots and CDC changes applied" in both and "held for `lake approve`" in both
    cdc_only = INSURANCE.model_copy(update={"sources": tuple(s for s in INSURANCE.sources if s.kind == "cdc")})
    described = table_description(cdc_only)
    assert ": CDC changes applied per key" in described and "snapshot" not in described


def _materialize(storage: LakeStorage, instance: dg.DagsterInstance, raise_on_error: bool = True
                 ) -> dg.ExecuteInProcessResult:
    resource = StorageResource(bucket=storage.bucket, home=storage.home)
    return dg.materialize([table_assets(INSURANCE), *table_checks(INSURANCE)], instance=instance,
                          raise_on_error=raise_on_error,
                          resources={"storage": resource, "engine": SparkEngine(), "rules": LakeRules()})


def test_job_applies_full_load_then_cdc_and_every_check_passes(storage: LakeStorage) -> None:
    instance = dg.DagsterInstance.ephemeral()
    storage.put_bytes("raw/fullload/full-load.csv", (DATA / "fullload" / "full-load.csv").read_bytes())
    first = _materialize(storage, instance)
    assert first.success
    for file in sorted((DATA / "cdcload").glob("*.csv")):
        storage.put_bytes(f"raw/cdcload/{file.name}", file.read_bytes())
    second = _materialize(storage, instance)
    assert second.success
    checks = second.get_asset_check_evaluations()
    assert len(checks) == 6 and all(c.passed for c in checks)

    meta = {k: v.value for k, v in
            instance.get_latest_materialization_event(dg.AssetKey("insurance")).asset_materialization.metadata.items()}
    assert (meta["rows_before"], meta["rows_after"]) == (25, 26)
    assert (meta["rows_inserted"], meta["rows_updated"], meta["rows_deleted"]) == (2, 3, 1)
    assert (meta["rows_superseded"], meta["rows_quarantined"]) == (1, 1)
    assert (meta["files_applied"], meta["files_refused"], meta["files_held"]) == (2, 0, 0)  # `lake dev`'s run line
    assert meta["rows_applied"] == sum(f["applied"] for f in meta["source_files"]) > 0
    assert meta["delta_version"] == 1 and meta["delta_version_before"] == 0
    assert [f["file"] for f in meta["source_files"]] == ["raw/cdcload/20240401-090000000.csv",
                                                           "raw/cdcload/20240402-090000000.csv"]
    assert all(secret not in str(meta) for secret in ("lake-local-secret",))

    feed = {k: v.value for k, v in instance.get_latest_materialization_event(
        dg.AssetKey("insurance_changes")).asset_materialization.metadata.items()}
    assert feed["versions_derived"] == [1] and feed["covered_through_version"] == 1
    assert (feed["rows_insert"], feed["rows_update_preimage"], feed["rows_update_postimage"], feed["rows_delete"]) \
        == (2, 3, 3, 1)
    history = {k: v.value for k, v in instance.get_latest_materialization_event(
        dg.AssetKey("insurance_history")).asset_materialization.metadata.items()}
    # every valid CDC row is a change of the history, the superseded one included
    assert history["changes_recorded"] == 2 + 3 + 1 + 1 and history["history_version"] == 1
    assert history["dagster/row_count"] == 25 + 7  # the first load, then the CDC files' changes

    # the quarantine, the tombstones and the ledger in the UI, against delta-rs's reading of the tables
    quarantine = {k: v.value for k, v in instance.get_latest_materialization_event(
        dg.AssetKey("insurance_quarantine")).asset_materialization.metadata.items()}
    stored = _delta(storage, "curated/insurance_quarantine").to_pyarrow_table().to_pylist()
    by_reason = Counter(r["reason"] for r in stored if r["run_id"] == second.run_id)
    assert by_reason and {f"quarantined_{reason}": n for reason, n in by_reason.items()}.items() <= quarantine.items()
    assert sum(v for k, v in quarantine.items() if k.startswith("quarantined_")) == meta["rows_quarantined"]
    assert quarantine["quarantined_no_sequence"] == by_reason.get("no_sequence", 0)  # every reason, 0 when none
    assert quarantine["dagster/row_count"] == len(stored)
    tombstones = instance.get_latest_materialization_event(dg.AssetKey("insurance_tombstones"))
    assert tombstones.asset_materialization.metadata["dagster/row_count"].value == \
        _delta(storage, "curated/insurance_tombstones").to_pyarrow_table().num_rows == 1  # the CDC's delete
    observed = [r.asset_observation.metadata for r in instance.fetch_observations(dg.AssetKey("lake_ledger"), 10).records]
    assert len(observed) == 2  # one per run
    latest = {k: v.value for k, v in observed[0].items()}
    assert latest["table"] == "insurance" and latest["insurance_files_applied"] == 2
    assert latest["insurance_rows_quarantined"] == meta["rows_quarantined"]
    assert latest["dagster/row_count"] == _delta(storage, "curated/_lake/ledger").to_pyarrow_table().num_rows == 3


def _delta(storage: LakeStorage, prefix: str) -> DeltaTable:
    return DeltaTable(storage.uri(prefix), storage_options=storage.delta_storage_options())


def test_blocking_history_check_fails_when_the_history_disagrees(storage: LakeStorage) -> None:
    """Close a current history row behind the pipeline's back: the SCD2 check must catch it."""
    instance = dg.DagsterInstance.ephemeral()
    storage.put_bytes("raw/fullload/full-load.csv", (DATA / "fullload" / "full-load.csv").read_bytes())
    assert _materialize(storage, instance).success
    history = DeltaTable(storage.uri("curated/insurance_history"), storage_options=storage.delta_storage_options())
    history.update({"is_current": "false"}, predicate="policy_id = 100462")
    result = _materialize(storage, instance, raise_on_error=False)
    failed = {c.check_name for c in result.get_asset_check_evaluations() if not c.passed}
    assert failed == {"matches_table"}


def test_blocking_key_check_fails_on_a_duplicated_key(storage: LakeStorage, spark) -> None:
    """Write a duplicate behind the pipeline's back: the key check must catch it."""
    instance = dg.DagsterInstance.ephemeral()
    storage.put_bytes("raw/fullload/full-load.csv", (DATA / "fullload" / "full-load.csv").read_bytes())
    assert _materialize(storage, instance).success
    uri = storage.uri("curated/insurance")
    spark.read.format("delta").load(uri).limit(1).write.format("delta").mode("append").save(uri)
    storage.put_bytes("raw/cdcload/20240403-090000000.csv", b"U,100463,2023-03-27,Urban,NY,East,5,Office Bldg,Y,Y\n")
    result = _materialize(storage, instance, raise_on_error=False)
    assert not result.success  # a failed blocking check fails the run
    failed = {c.check_name for c in result.get_asset_check_evaluations() if not c.passed}
    assert "key_unique_not_null" in failed
