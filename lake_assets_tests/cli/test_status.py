"""`lake status`: a summary per table and domain first, the filters, and the same answer from a
running `lake dev` (its socket) as computed by the command itself."""

import datetime as dt
import json

import pytest

from lake_assets.cli.dev_status import ask, lake_identity, serving_status
from lake_assets.core.ledger import APPLIED, REJECTED, Ledger, LedgerEntry
from lake_assets.core.raw_status import file_statuses
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.schema import RAW
from lake_assets_tests.helpers.cli import lake

FULL, CDC, CDC_PENDING = "raw/fullload/LOAD00000001.csv", "raw/cdcload/20240401-090000000.csv", \
    "raw/cdcload/20240402-090000000.csv"


def entry(storage: LakeStorage, key: str, status: str, applied: int, quarantined: int, at: dt.datetime
          ) -> LedgerEntry:
    etag = storage.get_client().head_object(Bucket=storage.bucket, Key=key)["ETag"].strip('"')
    return LedgerEntry("insurance", key, etag, 12, "fullload", status, applied + quarantined, applied, 0, quarantined,
                       0 if status == APPLIED else None, "run", at, None if status == APPLIED else "no_sequence")


@pytest.fixture
def lake_with_files(lake_env: LakeStorage) -> LakeStorage:
    """insurance: one object applied two days ago (3 rows, 1 quarantined), one refused an hour ago,
    one pending; TPC-DS: one pending dimension object."""
    for key in (FULL, CDC, CDC_PENDING):
        lake_env.put_bytes(key, b"policy_id\n1\n")
    lake_env.put_bytes(RAW.dimension_key("item"), b"1|x|\n")
    now = dt.datetime.now(dt.timezone.utc)
    Ledger(lake_env).record([entry(lake_env, FULL, APPLIED, 2, 1, now - dt.timedelta(days=2)),
                             entry(lake_env, CDC, REJECTED, 0, 3, now - dt.timedelta(hours=1))])
    return lake_env


def json_of(*args: str) -> list[dict]:
    code, out = lake("status", *args, "--format", "json")
    assert code == 0, out
    return json.loads(out)


def test_status_opens_with_a_summary_per_table_and_domain(lake_with_files: LakeStorage) -> None:
    code, out = lake("status")
    assert code == 0, out
    assert out.index("summary per table and domain") < out.index("4 raw objects") < out.index(FULL)
    summary = {line["table"]: line for line in json_of("--summary")}
    assert set(summary) == {"insurance", "tpcds.item"}
    insurance = summary["insurance"]
    assert (insurance["files"], insurance["applied"], insurance["refused"], insurance["pending"]) == (3, 1, 1, 1)
    assert (insurance["rows_applied"], insurance["rows_quarantined"]) == (2, 4)
    assert summary["tpcds.item"]["domain"] == "tpcds" and summary["tpcds.item"]["pending"] == 1


def test_status_filters_pending_table_and_since(lake_with_files: LakeStorage) -> None:
    assert {r["file"] for r in json_of("--pending")} == {CDC_PENDING, RAW.dimension_key("item")}
    assert {r["file"] for r in json_of("--table", "tpcds")} == {RAW.dimension_key("item")}
    assert {r["file"] for r in json_of("--table", "insurance", "--pending")} == {CDC_PENDING}
    recent = {r["file"] for r in json_of("--since", "1d")}  # the refusal and what landed just now, not FULL
    assert recent == {CDC, CDC_PENDING, RAW.dimension_key("item")}
    code, out = lake("status", "--since", "last week")
    assert code == 2 and "--since takes an ISO date" in out and len(out.strip().splitlines()) == 1


def test_lake_dev_answers_status_as_the_command_computes_it(lake_with_files: LakeStorage, tmp_path) -> None:
    computed = file_statuses(lake_with_files, Ledger(lake_with_files).latest_by_table())
    identity = lake_identity(lake_with_files.bucket)
    assert ask(tmp_path, identity) is None  # no `lake dev` on this home: the command computes it
    with serving_status(tmp_path, lake_with_files) as socket_path:
        assert socket_path.stat().st_mode & 0o077 == 0  # owner-only
        assert [s.as_dict() for s in computed] == ask(tmp_path, identity)
        assert ask(tmp_path, {**identity, "bucket": "another-lake"}) is None  # another lake's question
    assert not socket_path.exists()


def test_help_names_both_table_formats() -> None:
    code, out = lake("--help")
    assert code == 0 and "Delta Lake and Apache Iceberg" in out
