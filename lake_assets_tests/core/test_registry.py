"""Declarations read from YAML (core/registry.py, core/declaration.py): a mistake is one line naming
the file, the field and what it allows; tables are checked against each other."""

from pathlib import Path

import pytest

from lake_assets.core import registry
from lake_assets.core.declaration import DeclarationError

GOOD = """
name: orders
group: sales
keys: [order_id]
columns:
  - {name: order_id, type: BIGINT, nullable: false}
  - {name: amount, type: "DECIMAL(10,2)"}
  - {name: status, type: STRING, allowed: [NEW, PAID]}
sources:
  - {prefix: raw/orders/cdc/, kind: cdc}
"""


def declared(text: str, tmp_path: Path, name: str = "orders.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refused(text: str, tmp_path: Path) -> str:
    with pytest.raises(DeclarationError) as raised:
        registry.read_file(declared(text, tmp_path))
    message = str(raised.value)
    assert "\n" not in message and message.startswith(str(tmp_path))
    return message


def test_a_good_declaration_reads(tmp_path: Path) -> None:
    table = registry.read_file(declared(GOOD, tmp_path))
    assert (table.name, table.keys, table.column("amount").type) == ("orders", ("order_id",), "DECIMAL(10,2)")
    assert table.written == ["order_id", "amount", "status"]
    assert registry.read_file(declared(GOOD.replace("group: sales", "group: sales\npartition_by: [status]"),
                                       tmp_path)).partition_by == ("status",)


@pytest.mark.parametrize(("change", "expected"), [
    (("keys: [order_id]", "keys: []"), "keys: declare at least one key column"),
    (("keys: [order_id]", "keys: [id]"), "keys: id not among the columns"),
    (("- {prefix: raw/orders/cdc/, kind: cdc}", "- {prefix: raw/orders/cdc/, kind: stream}"),
     "sources.0.kind: Input should be 'cdc' or 'snapshot'"),
    (("type: STRING,", "type: VARCHAR2,"), "columns.2.type: type 'VARCHAR2' is not one of INT, BIGINT, STRING"),
    (("type: \"DECIMAL(10,2)\"", "type: \"DECIMAL(40,2)\""), "DECIMAL(p,s) (p <= 38)"),
    (("group: sales", "group: sales\ntrack_history: [colour]"), "track_history: colour not among the columns"),
    (("group: sales", "group: sales\nsequence_by: status"), "sequence_by: status is STRING"),
    (("group: sales", "group: sales\nexpectations: [{name: pos, condition: \"amount >=\"}]"),
     "expectations: pos: 'amount >=' is not a SQL condition"),
    (("group: sales", "group: sales\nexpectations: [{name: pos, condition: \"price > 0\"}]"),
     "expectations: pos: price not among the columns"),
    (("group: sales", "group: sales\npartition_by: [colour]"), "partition_by: colour not among the columns"),
    (("group: sales", "group: sales\npartition_by: [amount]"),
     "partition_by: amount is DECIMAL(10,2); a partition column is one of INT, BIGINT, STRING, DATE, BOOLEAN"),
    (("group: sales", "group: sales\npartition_by: [status]\nexcept_columns: [status]"),
     "partition_by: status is in except_columns"),
    (("- {name: status, type: STRING, allowed: [NEW, PAID]}",
      "- {name: status, type: STRING, allowed: [NEW, PAID]}\n  - {name: region, type: STRING, since: 2}\n"
      "partition_by: [region]"), "partition_by: region must be in the first contract version"),
    (("- {prefix: raw/orders/cdc/, kind: cdc}", "- {prefix: raw/orders/cdc/, kind: cdc, operation_column: kind}\n"
      "  - {prefix: raw/orders/full/, kind: snapshot}"), "sources: operation_column kind not among the columns"),
    (("- {prefix: raw/orders/cdc/, kind: cdc}", "- {prefix: raw/orders/cdc/, kind: cdc, sequence_from: arrival}\n"
      "  - {prefix: raw/orders/full/, kind: snapshot}\nsequence_by: order_id"),
     "sources: raw/orders/cdc/: sequence_from: arrival orders a CDC source's files"),
    (("name: orders", "name: Orders"), "must be lower-case"),
    (("group: sales", "group: Sales\nformat: iceberg"), "group: 'Sales' names an Iceberg table's catalog namespace"),
    (("- {prefix: raw/orders/cdc/, kind: cdc}", "- {prefix: raw/orders/cdc/, kind: cdc}\n  - {prefix: raw/o2/, kind: cdc}"),
     "sources: declare one source per kind"),
    (("kind: cdc}", "kind: cdc, header: always}"), "sources.0.header: Extra inputs are not permitted"),
    (("kind: cdc}", "kind: cdc, delimiter: '||'}"), "sources.0.delimiter: delimiter '||' must be one character"),
    (("kind: cdc}", "kind: cdc, delimiter: '\"'}"), "a tab or a sign other than a quote"),
    (("kind: cdc}", "kind: cdc, delimiter: x}"), "not a letter or digit"),
    (("kind: cdc}", "kind: cdc, suffix: .csv.gz}"), "sources.0.suffix: suffix '.csv.gz' must be a file name ending"),
])
def test_a_mistake_is_one_line_naming_the_field(tmp_path: Path, change: tuple[str, str], expected: str) -> None:
    assert expected in refused(GOOD.replace(*change), tmp_path)


def test_not_yaml_and_not_a_mapping_are_one_line(tmp_path: Path) -> None:
    assert "not YAML at line" in refused("name: [orders\n", tmp_path)
    assert "a declaration is a mapping" in refused("- orders\n", tmp_path)


def test_two_tables_on_one_raw_prefix_are_refused(tmp_path: Path) -> None:
    first = registry.read_file(declared(GOOD, tmp_path))
    other = declared(GOOD.replace("name: orders", "name: refunds").replace("raw/orders/cdc/", "raw/orders/"),
                     tmp_path, "refunds.yaml")
    with pytest.raises(DeclarationError, match="raw/orders/ overlaps raw/orders/cdc/, the raw prefix of table orders"):
        registry.check_together([(tmp_path / "orders.yaml", first), (other, registry.read_file(other))])
    with pytest.raises(DeclarationError, match="declared in .* too"):
        registry.check_together([(tmp_path / "orders.yaml", first), (tmp_path / "again.yaml", first)])
    reserved = declared(GOOD.replace("raw/orders/cdc/", "raw/tpcds/orders/"), tmp_path, "tpcds_like.yaml")
    with pytest.raises(DeclarationError, match="the TPC-DS star's raw zone"):
        registry.check_together([(reserved, registry.read_file(reserved))])
    star = declared(GOOD.replace("group: sales", "group: tpcds\nformat: iceberg"), tmp_path, "star.yaml")
    with pytest.raises(DeclarationError, match="group: tpcds is the TPC-DS star's catalog namespace"):
        registry.check_together([(star, registry.read_file(star))])
    # an Iceberg table's asset is <group>/<name>: in `raw`, `raw/x_cdc` would be table x's CDC source's too
    raw = declared(GOOD.replace("group: sales", "group: raw\nformat: iceberg"), tmp_path, "raw.yaml")
    with pytest.raises(DeclarationError, match="group: raw holds the raw sources' assets"):
        registry.check_together([(raw, registry.read_file(raw))])


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_a_tpcds_stars_table_name_is_refused(tmp_path: Path, fmt: str) -> None:
    """The star's tables are declared as any table is: a team's `customer`, in any group, would keep
    the tables the star's keeps beside its own (`customer_quarantine`, ...)."""
    customer = declared(GOOD.replace("name: orders", "name: customer").replace("group: sales",
                                                                              f"group: sales\nformat: {fmt}"),
                        tmp_path, "customer.yaml")
    with pytest.raises(DeclarationError, match=r"name: customer is the TPC-DS star's table \(.*tpcds/customer.yaml"):
        registry.check_together([(customer, registry.read_file(customer))])
    beside = declared(GOOD.replace("name: orders", "name: web_sales_tombstones"), tmp_path, "web_sales_tombstones.yaml")
    with pytest.raises(DeclarationError, match="its table web_sales_tombstones is one of table web_sales's too"):
        registry.check_together([(beside, registry.read_file(beside))])


def test_a_table_named_as_one_kept_beside_another_is_refused(tmp_path: Path) -> None:
    first = registry.read_file(declared(GOOD, tmp_path))
    other = declared(GOOD.replace("name: orders", "name: orders_tombstones").replace("raw/orders/cdc/",
                                                                                    "raw/tombstones/"),
                     tmp_path, "orders_tombstones.yaml")
    with pytest.raises(DeclarationError, match=r"orders_tombstones.yaml: name: orders_tombstones: its table "
                                               r"orders_tombstones is one of table orders's too \(.*orders.yaml\)"):
        registry.check_together([(tmp_path / "orders.yaml", first), (other, registry.read_file(other))])


def test_the_built_in_declarations_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(registry.TABLES_DIR_VARIABLE, raising=False)
    registry.declarations.cache_clear()
    assert [t.name for t in registry.declarations()] == ["insurance"]
    registry.declarations.cache_clear()


def test_a_declared_iceberg_table_is_found_by_its_declarations_name_too(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from lake_assets.core.tables import UnknownTable, table

    folder = tmp_path / "tables"
    folder.mkdir()
    declared(GOOD.replace("group: sales", "group: sales\nformat: iceberg"), folder)
    monkeypatch.setenv(registry.TABLES_DIR_VARIABLE, str(folder))
    registry.declarations.cache_clear()
    try:
        assert table("orders") == table("sales.orders")  # as `lake put` and `lake status` name it
        assert table("orders_history").name == "orders_history"
        with pytest.raises(UnknownTable):
            table("sales")
    finally:
        registry.declarations.cache_clear()
