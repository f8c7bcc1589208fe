"""Schema enforcement and controlled evolution (seed: delta-lake-minio-spark, use case 1).

Contract versions are declared in the table's declaration (each column's `since`); a test
declares a version by giving the declaration its columns, exactly as a developer would by
adding one to it.
"""

import pytest
from pyspark.sql import SparkSession

from lake_assets.core.formats.delta import open_table, to_arrow
from lake_assets.core.ledger import APPLIED, REJECTED
from lake_assets_tests.helpers.insurance_tables import INSURANCE
from lake_assets.core.declaration import Column, TableDeclaration
from lake_assets.declared.checks import schema_matches_contract
from lake_assets_tests.helpers.insurance_tables import Reason
from lake_assets.core.registry import declaration
from lake_assets_tests.helpers import insurance as insurance_helper
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.insurance.test_pipeline import (
    cdc,
    full_load,
    ledger,
    put,
    quarantine,
    row,
    run,
    version,
)

DECLARED = declaration("insurance")

V1 = tuple(c for c in DECLARED.columns if c.since == 1)
V2 = tuple(c for c in DECLARED.columns if c.since == 2)
V3 = (Column(name="risk_score", type="INT", since=3, description="Underwriting risk score"),)


def declare(monkeypatch: pytest.MonkeyPatch, *versions: tuple[Column, ...]) -> None:
    """Declare the table with the columns of `versions` (what the test's runs then apply)."""
    columns = tuple(c for version in versions for c in version)
    monkeypatch.setattr(insurance_helper, "INSURANCE",
                        TableDeclaration.model_validate({**DECLARED.model_dump(), "columns": columns}))


def _schema_matches_contract(storage: LakeStorage):
    return schema_matches_contract(insurance_helper.INSURANCE, storage)


def by_key(storage: LakeStorage, *columns: str) -> dict[int, tuple]:
    rows = to_arrow(open_table(storage, INSURANCE)).to_pylist()
    return {r["policy_id"]: tuple(r[c] for c in columns) for r in rows}


def test_declared_evolution_reads_old_rows_as_null_and_applies_both_file_shapes(
        storage: LakeStorage, spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    declare(monkeypatch, V1)
    put(storage, "raw/fullload/full.csv", full_load(row(1, 10), row(2, 20), row(3, 30)))
    run(storage, spark)
    assert "is_flagged" not in open_table(storage, INSURANCE).schema().to_arrow().names
    before = version(storage)

    declare(monkeypatch, V1, V2)
    put(storage, "raw/cdcload/20240401-090000000.csv", cdc("U," + row(1, 11)))  # v1 shape
    put(storage, "raw/cdcload/20240402-090000000.csv",  # v2 shape: the new field last
        cdc("U," + row(2, 21) + ",false", "I," + row(4, 40) + ",TRUE", "I," + row(5, 50) + ","))
    report = run(storage, spark)

    assert [c.operation for c in report.commits][0].startswith("add columns (is_flagged)")
    assert by_key(storage, "insured_value", "is_flagged") == {
        1: (11, None), 2: (21, False), 3: (30, None), 4: (40, True), 5: (50, None)}
    engine = spark.read.format("delta").load(INSURANCE.uri(storage)).where("policy_id IN (3, 4)")
    assert sorted((r.policy_id, r.is_flagged) for r in engine.collect()) == [(3, None), (4, True)]
    history = {h["version"]: h["operation"] for h in open_table(storage, INSURANCE).history()}
    assert history[before + 1] == "ADD COLUMN"  # `lake history` shows the schema change
    assert {e["status"] for e in ledger(storage).values()} == {APPLIED}
    assert _schema_matches_contract(storage).passed
    described = {f.name: f.metadata.get("comment") for f in open_table(storage, INSURANCE).schema().fields}
    assert described["is_flagged"] == V2[-1].description


def test_type_mismatch_is_quarantined_and_writes_nothing(storage: LakeStorage, spark: SparkSession) -> None:
    put(storage, "raw/fullload/full.csv", ",".join(c.name for c in V1 + V2) + "\n" + row(1, 10) + ",true\n")
    run(storage, spark)
    before = version(storage)
    put(storage, "raw/cdcload/20240401-090000000.csv", cdc("U," + row(1, 11) + ",maybe", "U,1,not-a-date,Urban,CA,"
                                                           "West,12,Retail,N,N,false"))
    report = run(storage, spark)
    assert report.commits == [] and version(storage) == before
    assert sorted(q["reason"] for q in quarantine(storage)) == [Reason.BAD_BOOLEAN, Reason.BAD_DATE]
    assert by_key(storage, "insured_value", "is_flagged") == {1: (10, True)}


def test_undeclared_column_is_refused_whole_then_applies_once_declared(
        storage: LakeStorage, spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    put(storage, "raw/fullload/full.csv", full_load(row(1, 10)))
    run(storage, spark)
    before = version(storage)
    extra = "raw/cdcload/20240401-090000000.csv"
    put(storage, extra, cdc("U," + row(1, 11) + ",true,7", "I," + row(2, 20) + ",false,3"))
    header = "raw/fullload/2024/05/01/snapshot.csv"
    put(storage, header, ",".join([*(c.name for c in V1 + V2), "risk_score"]) + "\n" + row(1, 12) + ",true,9\n")

    report = run(storage, spark)
    assert report.commits == [] and version(storage) == before
    entries = ledger(storage)
    for key in (extra, header):
        assert entries[key]["status"] == REJECTED
        assert entries[key]["detail"].startswith("undeclared_column") and "contract v2" in entries[key]["detail"]
    assert {q["reason"] for q in quarantine(storage)} == {Reason.UNDECLARED_COLUMN}
    assert run(storage, spark).files == []  # refused, not retried while the contract is unchanged

    declare(monkeypatch, V1, V2, V3)  # the developer declares the column
    report = run(storage, spark)
    assert {f.source_file: f.status for f in report.files} == {extra: APPLIED, header: APPLIED}
    # the snapshot (May) is newer than the CDC file (April): it decides, and key 2 is not in it
    assert by_key(storage, "insured_value", "is_flagged", "risk_score") == {1: (12, True, 9)}
    assert quarantine(storage) == []  # the refusal's rows are accounted for by the new attempt
    assert _schema_matches_contract(storage).passed


def test_column_descriptions_reach_the_dagster_column_table(storage: LakeStorage) -> None:
    from lake_assets.declared.assets import column_schema

    schema = column_schema(DECLARED)
    described = {c.name: c.description for c in schema.columns}
    assert described["policy_id"].startswith("Policy number")
    assert described["is_flagged"] and described["_sequence"]
    assert all(described.values())


def test_declared_rules_reach_the_dagster_column_table_as_constraints() -> None:
    from lake_assets.core.registry import parse
    from lake_assets.declared.assets import column_schema

    rules = {c.name: c.constraints for c in column_schema(DECLARED).columns}
    assert (rules["policy_id"].nullable, rules["policy_id"].unique, rules["policy_id"].other) == (False, True, [">= 0"])
    assert rules["flood_coverage"].other == ["one of Y, N"] and rules["flood_coverage"].nullable
    coded = parse("""
name: coded
group: coded
keys: [region, id]
columns:
  - {name: region, type: STRING, nullable: false, pattern: "[A-Z]{2}"}
  - {name: id, type: INT}
sources:
  - {prefix: raw/coded/cdc/, kind: cdc}
""", "test")
    rules = {c.name: c.constraints for c in column_schema(coded).columns}
    assert (rules["region"].nullable, rules["region"].unique, rules["region"].other) == (False, False, ["matches [A-Z]{2}"])
    assert (rules["id"].nullable, rules["id"].unique) == (False, False)  # a key: never NULL, unique only with region
