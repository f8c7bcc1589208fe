"""Independent readers of `insurance_changes` and `insurance_history` for tests."""

from collections import Counter

from lake_assets.core.formats.delta import open_table, to_arrow
from lake_assets.core.tables import INSURANCE, INSURANCE_CHANGES, INSURANCE_HISTORY
from lake_assets.insurance.contract import DATA_COLUMN_NAMES
from lake_assets.resources.storage import LakeStorage


def replay(storage: LakeStorage, through: int | None = None) -> dict[int, dict]:
    """The table rebuilt from an empty one by applying the stored feed in version order
    (inserts and postimages set the row, deletes remove it; preimages must match the row)."""
    delta = open_table(storage, INSURANCE_CHANGES)
    rows = to_arrow(delta).to_pylist() if delta else []
    order = {"delete": 0, "update_preimage": 1, "update_postimage": 2, "insert": 3}
    rows.sort(key=lambda r: (r["_commit_version"], r["policy_id"], order[r["_change_type"]]))
    state: dict[int, dict] = {}
    for change in rows:
        if through is not None and change["_commit_version"] > through:
            break
        key, data = change["policy_id"], {c: change[c] for c in DATA_COLUMN_NAMES}
        kind = change["_change_type"]
        if kind == "insert":
            assert key not in state, change
            state[key] = data
        elif kind == "update_preimage" or kind == "delete":
            assert state.get(key) == data, change
            if kind == "delete":
                del state[key]
        else:
            assert key in state, change
            state[key] = data
    return state


def assert_history_invariants(storage: LakeStorage) -> None:
    """SCD2: per key, versions ordered and contiguous (each closed when the next opens), at
    most one current row, a closed row has a valid_to, the rows valid at each version are the
    table at that version, and the current rows are the table."""
    delta = open_table(storage, INSURANCE_HISTORY)
    rows = to_arrow(delta).to_pylist() if delta else []
    by_key: dict[int, list[dict]] = {}
    for r in rows:
        by_key.setdefault(r["policy_id"], []).append(r)
    for key, versions in by_key.items():
        versions.sort(key=lambda r: r["valid_from_version"])
        assert sum(r["is_current"] for r in versions) <= 1, key
        for earlier, later in zip(versions, versions[1:]):
            assert not earlier["is_current"], key
            assert earlier["valid_to_version"] is not None
            assert earlier["valid_to_version"] <= later["valid_from_version"], key
            assert earlier["valid_to"] <= later["valid_from"]
        for r in versions:
            assert (r["valid_to"] is None) == r["is_current"] == (r["valid_to_version"] is None), r
            assert r["valid_to"] is None or r["valid_from"] <= r["valid_to"], r
            assert r["valid_to_version"] is None or r["valid_from_version"] < r["valid_to_version"], r
    table = open_table(storage, INSURANCE)
    for version in range(table.version() + 1 if table else 0):  # the rows valid at V are the table at V
        valid = {r["policy_id"]: {c: r[c] for c in DATA_COLUMN_NAMES} for r in rows
                 if r["valid_from_version"] <= version < (r["valid_to_version"] if r["valid_to_version"] is not None
                                                          else version + 1)}
        at = to_arrow(open_table(storage, INSURANCE, version=version)).select(DATA_COLUMN_NAMES).to_pylist()
        assert valid == {r["policy_id"]: r for r in at}, f"history valid at v{version}"
    current = [r for r in rows if r["is_current"]]
    assert not [k for k, n in Counter(r["policy_id"] for r in current).items() if n > 1]
    live = to_arrow(table).select(DATA_COLUMN_NAMES).to_pylist() if table else []
    assert {r["policy_id"]: {c: r[c] for c in DATA_COLUMN_NAMES} for r in current} == \
        {r["policy_id"]: r for r in live}
