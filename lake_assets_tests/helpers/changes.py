"""Independent readers of `insurance_changes` and `insurance_history` for tests."""

from collections import Counter

from lake_assets.core.formats.delta import open_table, to_arrow
from lake_assets.core.sequence import ARRIVAL_PART, FileStamp
from lake_assets_tests.helpers.insurance_tables import INSURANCE, INSURANCE_CHANGES, INSURANCE_HISTORY
from lake_assets_tests.helpers.insurance_tables import DATA_COLUMN_NAMES
from lake_assets.resources.storage import LakeStorage


def replay(storage: LakeStorage, through: int | None = None) -> dict[int, dict]:
    """The table rebuilt from an empty one by applying the stored feed in version order
    (inserts and postimages set the row, deletes remove it; preimages must match the row).
    The version the feed answers from its files (the table's first) is the table's rows then."""
    delta = open_table(storage, INSURANCE_CHANGES)
    rows = to_arrow(delta).to_pylist() if delta else []
    if delta is not None and not any(r["_commit_version"] == 0 for r in rows):
        # the table's first commit is not copied into the feed: its rows, read at that version, are inserts
        rows += [{**r, "_change_type": "insert", "_commit_version": 0}
                 for r in to_arrow(open_table(storage, INSURANCE, 0)).to_pylist()]
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


def history(storage: LakeStorage) -> list[dict]:
    """The history's rows ordered by key and sequence."""
    delta = open_table(storage, INSURANCE_HISTORY)
    rows = to_arrow(delta).to_pylist() if delta else []
    return sorted(rows, key=lambda r: (r["policy_id"], r["_sequence"]))


def history_versions(storage: LakeStorage) -> list[tuple]:
    """(key, from sequence, to sequence, is_current, data or None for a delete) per history row."""
    return [(r["policy_id"], r["_sequence"], r["valid_to_sequence"], r["is_current"],
             None if r["_operation"] == "D" else {c: r[c] for c in DATA_COLUMN_NAMES}) for r in history(storage)]


def assert_history_invariants(storage: LakeStorage) -> None:
    """SCD2 on the sequence axis: per key, each version is valid until the key's next change
    (`valid_to_sequence` is its `_sequence`), a delete is valid at no point, only the last
    change can be current (and is, unless a delete), validity times follow the sequences,
    and the current rows are the table."""
    rows = history(storage)
    by_key: dict[int, list[dict]] = {}
    for r in rows:
        by_key.setdefault(r["policy_id"], []).append(r)
    for key, changes in by_key.items():
        for earlier, later in zip(changes, changes[1:]):
            assert earlier["_sequence"] < later["_sequence"], key
            expected = earlier["_sequence"] if earlier["_operation"] == "D" else later["_sequence"]
            assert earlier["valid_to_sequence"] == expected and not earlier["is_current"], earlier
        last = changes[-1]
        deleted = last["_operation"] == "D"
        assert last["is_current"] is not deleted, last
        assert last["valid_to_sequence"] == (last["_sequence"] if deleted else None), last
        for r in changes:
            assert (r["valid_from"] is None) == (FileStamp.parse(r["_sequence"]).part >= ARRIVAL_PART), r
    current = [r for r in rows if r["is_current"]]
    assert not [k for k, n in Counter(r["policy_id"] for r in current).items() if n > 1]
    table = open_table(storage, INSURANCE)
    live = to_arrow(table).select(DATA_COLUMN_NAMES).to_pylist() if table else []
    assert {r["policy_id"]: {c: r[c] for c in DATA_COLUMN_NAMES} for r in current} == \
        {r["policy_id"]: r for r in live}
