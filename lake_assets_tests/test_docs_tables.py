"""docs/tables.md ("Declare your own table") against the code it documents.

Every YAML block of the page is loaded through the real registry parser (`core/registry.py`) and
must be the declaration the page says it is; the field reference lists exactly the model's fields
with its defaults; the scaffold the page shows is what `lake table add` renders for the page's
sample; and the Dagster definitions the page names are the ones a declaration gets. So the page
cannot drift from the code without one of these failing.
"""

import re
from pathlib import Path

import dagster as dg
import pytest
import yaml
from markdown_it import MarkdownIt
from pydantic import BaseModel

from lake_assets.core import registry, scaffold
from lake_assets.core.declaration import (Action, Column, Expectation, Freshness, SnapshotRules, Source, SourceKind,
                                          TableDeclaration)

PAGE = Path(__file__).resolve().parents[1] / "docs" / "tables.md"


def _fences(markdown: str, info: str) -> list[str]:
    """The content of every fenced code block of the given info string, as CommonMark reads them."""
    return [token.content for token in MarkdownIt().parse(markdown) if token.type == "fence" and token.info == info]


def _examples(markdown: str) -> dict[str, TableDeclaration]:
    """Every YAML block of the page, parsed by the registry, by table name."""
    parsed = [registry.parse(block, f"{PAGE.name} block {n}") for n, block in enumerate(_fences(markdown, "yaml"))]
    return {declaration.name: declaration for declaration in parsed}


def _section(markdown: str, heading: str) -> str:
    """The text under a heading, up to the next heading of any level."""
    start = markdown.index(f"{heading}\n")
    following = re.search(r"^#{1,6} ", markdown[start + len(heading):], re.MULTILINE)
    return markdown[start:start + len(heading) + following.start()] if following else markdown[start:]


def _table_rows(section: str) -> list[list[str]]:
    """The body rows of the Markdown table in `section`, cells stripped."""
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines[2:]]


def _code(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_every_yaml_example_parses_into_the_declaration_the_page_describes() -> None:
    examples = _examples(PAGE.read_text())
    assert sorted(examples) == ["customers", "orders", "users"]

    orders = examples["orders"]  # the reviewed walk-through table
    assert orders.keys == ("order_id",) and orders.group == "orders" and orders.owners == ("team:sales-data",)
    assert [(c.name, c.type) for c in orders.columns] == [
        ("order_id", "INT"), ("customer_id", "STRING"), ("status", "STRING"), ("amount", "DECIMAL(10,2)"),
        ("placed_on", "DATE")]
    assert orders.column("order_id").minimum == 1 and not orders.column("order_id").nullable
    assert orders.column("status").allowed == ("NEW", "PAID", "SHIPPED", "CANCELLED")
    assert [(s.prefix, s.kind) for s in orders.sources] == [("raw/orders/fullload/", SourceKind.SNAPSHOT),
                                                             ("raw/orders/cdc/", SourceKind.CDC)]
    assert orders.expectations == (Expectation(name="amount_not_negative", condition="amount IS NULL OR amount >= 0",
                                               action=Action.DROP),)
    assert orders.history and orders.change_feed and orders.sequence_by is None  # "default to true", the file's time

    customers = examples["customers"]  # every option
    changes = customers.sources[1]
    assert (changes.kind, changes.operation_column, changes.delete, changes.truncate) == \
        (SourceKind.CDC, "operation", "DELETE", "TRUNCATE")
    assert customers.sequence_by == "changed_at" and customers.except_columns == ("operation",)
    assert customers.track_history == ("tier", "credit_limit") and customers.tracked == ["tier", "credit_limit"]
    assert customers.ignore_null_updates and customers.tombstone_retention_days == 30
    assert customers.guard == SnapshotRules(hold_rejected=False, max_shrink=0.2)
    assert customers.freshness == Freshness(max_lag_minutes=1440)
    assert [c.version for c in customers.contracts] == [1, 2] and customers.column("email").since == 2
    assert "operation" not in customers.written and "email" in customers.written
    assert [e.action for e in customers.expectations] == [Action.DROP, Action.WARN]

    users = examples["users"]  # Databricks' `users` example, declared
    assert users.keys == ("userid",) and users.sequence_by == "sequencenum"
    assert users.except_columns == ("operation", "sequencenum") and users.track_history_except == ("city",)
    assert users.tracked == ["name"] and users.history  # STORED AS SCD TYPE 2, TRACK HISTORY ON * EXCEPT (city)
    assert (users.sources[0].operation_column, users.sources[0].delete, users.sources[0].truncate) == \
        ("operation", "DELETE", "TRUNCATE")


def test_the_examples_are_declarable_beside_the_lakes_own_tables() -> None:
    """The registry's checks across files (names, raw prefixes) pass for the examples and the built-in tables."""
    built_in = [(path, registry.read_file(path)) for path in sorted(registry.BUILT_IN.glob("*.yaml"))]
    examples = [(PAGE, declaration) for declaration in _examples(PAGE.read_text()).values()]
    assert len(registry.check_together(built_in + examples)) == len(built_in) + len(examples)


_REFERENCE = {"### The table": TableDeclaration, "### A column": Column, "### A source": Source,
              "### Guard": SnapshotRules, "### An expectation": Expectation}


def _plain(value: object) -> object:
    """A model default as YAML writes it (tuples as lists, enums as their values, models as mappings)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return getattr(value, "value", value)


@pytest.mark.parametrize("heading", list(_REFERENCE))
def test_the_field_reference_lists_every_field_with_its_default(heading: str) -> None:
    model = _REFERENCE[heading]
    rows = _table_rows(_section(PAGE.read_text(), heading))
    documented = {_code(row[0])[0]: row[2] for row in rows}
    assert len(documented) == len(rows), heading
    assert sorted(documented) == sorted(model.model_fields), heading  # every field, once
    for name, default in documented.items():
        field = model.model_fields[name]
        if default == "required":
            assert field.is_required(), name
        elif default.startswith("`"):
            assert not field.is_required() and yaml.safe_load(_code(default)[0]) == _plain(field.default), name
        else:  # "none ...": nothing declared
            assert default.startswith("none") and field.default is None, name


def test_the_scaffold_shown_is_what_lake_table_add_writes_for_the_sample_shown() -> None:
    text = PAGE.read_text()
    sample = next(block for block in _fences(text, "text") if block.startswith("order_id,"))
    shown = next(block for block in _fences(text, "text") if block.startswith("# `orders`, scaffolded"))
    written = scaffold.render("orders", scaffold.guess(sample.encode()), "samples/orders.csv")
    assert shown.strip() == written.strip()
    assert registry.parse(written, "scaffold").keys == ("order_id",)


def test_the_dagster_definitions_named_are_the_ones_a_declaration_gets() -> None:
    from lake_assets.declared import declared
    from lake_assets.declared.partitions import partitions_def

    orders = _examples(PAGE.read_text())["orders"].model_copy(update={"freshness": Freshness(max_lag_minutes=60)})
    made = declared(orders, poll_seconds=1, wait_seconds=0)
    names = {key.to_user_string() for asset in made.assets for key in
             (getattr(asset, "keys", None) or {asset.key})}
    names |= {key.name for check in made.checks for key in check.check_keys}
    names |= {made.job.name} | {sensor.name for sensor in made.sensors}
    section = _section(PAGE.read_text(), "## What each declaration gets in Dagster")
    documented = {name for row in _table_rows(section) for name in _code(row[1])}
    assert {"expect_<name>", "orders_<column>"} <= documented
    documented = ({n for n in documented if n not in ("expect_<name>", "orders_<column>")}
                  | {f"expect_{e.name}" for e in orders.expectations})
    assert documented == names
    # the partitions, for a source of partition snapshots: named as the row says
    column = orders.columns[1].name
    by_column = orders.model_copy(update={"sources": tuple(
        s.model_copy(update={"partition": column}) if s.kind == "snapshot" else s for s in orders.sources)})
    assert partitions_def(by_column) == dg.DynamicPartitionsDefinition(name=f"orders_{column}")
    assert partitions_def(orders) is None
    tables = next(asset for asset in made.assets if len(getattr(asset, "keys", ())) > 1)
    assert f"one multi-asset (`{tables.node_def.name}`)" in section
