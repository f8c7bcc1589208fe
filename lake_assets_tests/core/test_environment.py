"""`environment()` sets variables for a block and puts back exactly what was there."""

import os

import pytest

from lake_assets.core.environment import environment


def test_a_block_sets_and_unsets_and_everything_is_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKE_TEST_KEPT", "before")
    monkeypatch.setenv("LAKE_TEST_UNSET", "present")
    monkeypatch.delenv("LAKE_TEST_NEW", raising=False)
    with pytest.raises(RuntimeError), \
            environment({"LAKE_TEST_KEPT": "during", "LAKE_TEST_UNSET": None, "LAKE_TEST_NEW": "new"}):
        assert (os.environ["LAKE_TEST_KEPT"], os.environ.get("LAKE_TEST_UNSET"), os.environ["LAKE_TEST_NEW"]) == \
            ("during", None, "new")
        raise RuntimeError("the block failed")  # put back all the same
    assert os.environ["LAKE_TEST_KEPT"] == "before" and os.environ["LAKE_TEST_UNSET"] == "present"
    assert "LAKE_TEST_NEW" not in os.environ
