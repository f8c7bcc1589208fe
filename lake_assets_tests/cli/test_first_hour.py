"""A newcomer's first hour: the demo shows the seed's columns, `lake history` agrees with the
run lines and the change feed, and `lake run` reports every file it found pending, whoever
applied it (against the session's real S3 server and Sail engine)."""

import json
import re

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lake_assets.cli.fates import pending_snapshot
from lake_assets.cli.job_runner import apply_everything
from lake_assets.cli.run import demo_insurance
from lake_assets.cli.session import lake_session
from lake_assets_tests.helpers.insurance_tables import INSURANCE, INSURANCE_CHANGES
from lake_assets_tests.helpers.insurance_tables import AUDIT_COLUMNS, DATA_COLUMN_NAMES
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.conftest import DATA
from lake_assets_tests.helpers.cli import lake

RUN_LINE = re.compile(r"insurance: (.+?), rows \d+ -> \d+ \(\+(\d+) inserted, (\d+) updated, (\d+) deleted")


def test_demo_prints_the_seed_columns_and_a_readable_first_version(
        lake_env: LakeStorage, capsys: pytest.CaptureFixture[str]) -> None:
    with lake_session() as session:
        demo_insurance(session, DATA)
    out = capsys.readouterr().out

    headers = [[cell.strip() for cell in line.split("┃") if cell.strip()]
               for line in out.splitlines() if "┃ policy_id" in line]
    assert headers == [DATA_COLUMN_NAMES, DATA_COLUMN_NAMES]  # after the full load, after the CDC batches
    hints = [line for line in out.splitlines() if "every row also carries" in line]
    assert len(hints) == 2 and all(c in hints[0] for c in AUDIT_COLUMNS)
    assert 'lake query "SELECT * FROM insurance WHERE policy_id IN' in hints[0]
    assert [m.group(1) for m in RUN_LINE.finditer(out)] == ["created at version 0", "version 0 -> 1"]
    assert "version -1" not in out


def _delta_rs_changes(storage: LakeStorage, version: int) -> tuple[int, int, int]:
    """(inserted, updated, deleted) of `version`, by comparing it with the version before,
    keyed by policy_id, read by delta-rs (independent of the lake's change feed code)."""
    def rows(v: int) -> dict[int, dict]:
        if v < 0:
            return {}
        table = DeltaTable(INSURANCE.uri(storage), version=v, storage_options=storage.delta_storage_options())
        return {r["policy_id"]: r for r in pa.table(table.to_pyarrow_dataset().to_table()).to_pylist()}
    before, after = rows(version - 1), rows(version)
    return (len(after.keys() - before.keys()),
            sum(before[k] != after[k] for k in after.keys() & before.keys()),
            len(before.keys() - after.keys()))


def test_history_counts_equal_the_run_lines_the_feed_and_delta_rs(lake_env: LakeStorage) -> None:
    assert lake("put", str(DATA / "fullload" / "full-load.csv"), "--to", "fullload")[0] == 0
    code, first = lake("run")
    assert code == 0, first
    for file in sorted((DATA / "cdcload").glob("*.csv")):
        assert lake("put", str(file), "--to", "cdcload")[0] == 0
    code, second = lake("run")
    assert code == 0, second
    run_lines = {0: RUN_LINE.search(first).groups()[1:], 1: RUN_LINE.search(second).groups()[1:]}
    assert run_lines[1] == ("2", "3", "1")  # the seed's CDC batch: inserts, updates and a delete

    code, out = lake("history", "insurance", "--format", "json")
    assert code == 0, out
    history = {h["version"]: h for h in json.loads(out)}
    feed = DeltaTable(INSURANCE_CHANGES.uri(lake_env), storage_options=lake_env.delta_storage_options())
    feed_rows = pa.table(feed.to_pyarrow_dataset().to_table(columns=["_commit_version", "_change_type"])).to_pylist()
    # the first commit's feed is not copied into the feed table: it is the files it added, as inserts
    first = DeltaTable(INSURANCE.uri(lake_env), version=0, storage_options=lake_env.delta_storage_options())
    feed_rows += [{"_commit_version": 0, "_change_type": "insert"}] * first.to_pyarrow_dataset().count_rows()
    for version in (0, 1):
        shown = (history[version]["rows_inserted"], history[version]["rows_updated"], history[version]["rows_deleted"])
        in_feed = tuple(sum(r["_commit_version"] == version and r["_change_type"] == kind for r in feed_rows)
                        for kind in ("insert", "update_postimage", "delete"))
        assert shown == in_feed == _delta_rs_changes(lake_env, version) == tuple(map(int, run_lines[version]))
    assert history[0]["operation"].endswith("full load (create)")
    assert history[1]["operation"].startswith("WRITE: merge (")


UNDECLARED = b"I,990001,2024-03-31,Urban,CA,West,1,Retail,N,N,true,surplus\n"  # one field more than v2 declares


def test_lake_run_reports_files_another_run_handled(
        lake_env: LakeStorage, capsys: pytest.CaptureFixture[str]) -> None:
    # the race, made deterministic: `lake run`'s snapshot of what is pending is taken, then another
    # run (here a `lake run`; the sensor's run records the same ledger entries) handles those files
    lake_env.put_bytes("raw/fullload/full-load.csv", (DATA / "fullload" / "full-load.csv").read_bytes())
    with lake_session() as session:
        snapshot = pending_snapshot(session.storage)
    assert [p.obj.key for p in snapshot] == ["raw/fullload/full-load.csv"]
    assert lake("run")[0] == 0
    capsys.readouterr()
    with lake_session() as session:
        code = apply_everything(session, snapshot)
    out = capsys.readouterr().out
    assert code == 0
    assert re.search(r"applied: raw/fullload/full-load.csv -> insurance version 0 \(25 rows\); by another run "
                     r"\(run \w{8}, launched by lake run\)", out), out

    lake_env.put_bytes("raw/cdcload/20240501-090000000.csv", UNDECLARED)
    with lake_session() as session:
        snapshot = pending_snapshot(session.storage)
    assert lake("run")[0] == 3  # the other run refuses it
    capsys.readouterr()
    with lake_session() as session:
        code = apply_everything(session, snapshot)
    err = capsys.readouterr().err
    assert code == 3  # refused, though not by this command's run (which found nothing to do)
    assert re.search(r"refused: raw/cdcload/20240501-090000000.csv: undeclared_column.*; by another run "
                     r"\(run \w{8}, launched by lake run\); see `lake status`", err), err

    # a file re-delivered (new content) after the snapshot: its first content is gone, not left pending
    late = "raw/cdcload/20240502-090000000.csv"
    lake_env.put_bytes(late, b"U,100463,2025-03-31,Urban,NY,East,1,Retail,Y,Y\n")
    with lake_session() as session:
        snapshot = pending_snapshot(session.storage)
    lake_env.put_bytes(late, b"U,100463,2025-03-31,Urban,NY,East,2,Retail,Y,Y\n")
    with lake_session() as session:
        code = apply_everything(session, snapshot)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"gone: {late} was deleted or re-delivered before a run applied it" in captured.out
