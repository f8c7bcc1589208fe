"""The rules a run applies: a table's declared guard and tombstone retention, unless the
environment sets them for every table."""

import datetime as dt

import pytest

from lake_assets.core.apply.run import IngestRules
from lake_assets.settings import RulesSettings


def test_unset_variables_leave_each_declaration_its_own_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAKE_FULLLOAD_MAX_SHRINK", raising=False)
    monkeypatch.delenv("LAKE_TOMBSTONE_RETENTION_DAYS", raising=False)
    rules = IngestRules.from_rules(RulesSettings.from_env())
    assert rules.max_shrink is None and rules.tombstone_retention is None


def test_set_variables_apply_to_every_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKE_FULLLOAD_MAX_SHRINK", "0.9")
    monkeypatch.setenv("LAKE_TOMBSTONE_RETENTION_DAYS", "2")
    rules = IngestRules.from_rules(RulesSettings.from_env())
    assert rules.max_shrink == 0.9 and rules.tombstone_retention == dt.timedelta(days=2)
