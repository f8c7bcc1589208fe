"""The generator lands exactly the raw-zone contract, with dsdgen's rows, none dropped."""

import re

import pytest

from lake_assets.resources.duckdb_reader import connect
from lake_assets.core.errors import UsageError
from lake_assets.tpcds import raw_contract as contract
from lake_assets.tpcds.generate import generate, join_fact_files
from lake_assets.tpcds.raw_duckdb import dsdgen_columns, raw_connection
from lake_assets_tests.helpers.progress import RecordingProgress
from lake_assets_tests.tpcds.conftest import SCALE

FACT_KEY = re.compile(r"raw/tpcds/web_sales/ws_sold_date_sk=(24\d{5}|__HIVE_DEFAULT_PARTITION__)"
                      r"/part-\d{5}\.dat")


@pytest.fixture(scope="module")
def dsdgen_counts() -> dict[str, int]:
    """Rows per star table from a separate dsdgen run at the same scale (the reference)."""
    con = connect(":memory:", "tpcds")
    con.execute(f"CALL dsdgen(sf={SCALE})")
    return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in contract.STAR_TABLES}


def test_object_names(raw_star):
    storage, result = raw_star
    # other tests of the session may have landed correction objects beside the generated data
    keys = [o["Key"] for o in storage.list_objects(contract.RAW_PREFIX) if not o["Key"].startswith(contract.CDC_PREFIX)]
    for table in contract.DIMENSIONS:
        assert contract.dimension_key(table) in keys
    fact_keys = [k for k in keys if k.startswith(contract.FACT_PREFIX)]
    assert fact_keys and all(FACT_KEY.fullmatch(k) for k in fact_keys), fact_keys[:5]
    assert len(keys) == len(contract.DIMENSIONS) + len(fact_keys) == result.objects
    folders = {k.rsplit("/", 1)[0] for k in fact_keys}
    assert all(k.endswith("/part-00000.dat") for k in fact_keys)  # one object per sold date
    assert len(folders) == result.sold_dates + 1  # + the NULL-date folder
    assert contract.fact_key(None) in keys


def _lines(storage, key: str) -> list[str]:
    body, _ = storage.get_bytes(key)
    text = body.decode()
    assert text.endswith("\n") and "\r" not in text and '"' not in text
    return text[:-1].split("\n")


def test_field_counts_and_format(raw_star):
    storage, _ = raw_star
    columns = dsdgen_columns()
    fact_keys = [o["Key"] for o in storage.list_objects(contract.FACT_PREFIX)]
    samples = {table: [contract.dimension_key(table)] for table in contract.DIMENSIONS}
    samples[contract.FACT] = fact_keys[:3] + fact_keys[-3:]
    for table, keys in samples.items():
        for key in keys:
            lines = _lines(storage, key)
            assert lines and all(line.count("|") == len(columns[table]) - 1 for line in lines), key
    # A date column is ISO, a decimal keeps its two places: the first date_dim line, field by field.
    first = _lines(storage, contract.dimension_key("date_dim"))[0].split("|")
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", first[2])


def test_null_date_rows_land_in_the_default_partition(raw_star, dsdgen_counts):
    storage, result = raw_star
    lines = _lines(storage, contract.fact_key(None))
    assert result.null_date_rows > 0 and len(lines) == result.null_date_rows
    assert all(line.split("|")[0] == "" for line in lines)


def test_row_counts_equal_dsdgen_and_dates_match_folders(raw_star, dsdgen_counts):
    storage, result = raw_star
    con = raw_connection(storage)
    for table in contract.STAR_TABLES:
        assert con.execute(f"SELECT count(*) FROM lake.tpcds.{table}").fetchone()[0] == dsdgen_counts[table], table
    assert result.rows == dsdgen_counts
    source = storage.uri(f"{contract.FACT_PREFIX}*/*.dat")
    mismatched = con.execute(f"""
        SELECT count(*) FROM (
            SELECT regexp_extract(filename, 'ws_sold_date_sk=([^/]+)/', 1) AS folder, column00 AS sk
            FROM read_csv('{source}', delim='|', header=false, quote='', nullstr='', all_varchar=true,
                          filename=true, hive_partitioning=false))
        LEFT JOIN lake.tpcds.date_dim ON TRY_CAST(sk AS BIGINT) = d_date_sk
        WHERE folder IS DISTINCT FROM coalesce(CAST(d_date_sk AS VARCHAR), '{contract.DEFAULT_PARTITION}')
    """).fetchone()[0]
    assert mismatched == 0


def test_scale_out_of_range_is_refused(storage):
    with pytest.raises(UsageError, match="scale"):
        generate(storage, 20)


def test_several_copy_files_in_a_folder_become_one(tmp_path):
    folder = tmp_path / "ws_sold_date_sk=2451545"
    folder.mkdir()
    (folder / "part-0.dat").write_text("1|a\n2|b\n")
    (folder / "part-1.dat").write_text("3|c\n")
    (folder / "part-10.dat").write_text("4|d\n")
    join_fact_files(tmp_path)
    assert [p.name for p in folder.iterdir()] == ["part-0.dat"]
    assert (folder / "part-0.dat").read_text() == "1|a\n2|b\n3|c\n4|d\n"


def test_upload_reports_its_progress_object_by_object(storage, tmp_path) -> None:
    from lake_assets.tpcds.generate import upload_tree

    for day in ("2450816", "2450817", "2450818"):
        folder = tmp_path / contract.FACT_PREFIX / f"{contract.DAY_FOLDER_COLUMN}={day}"
        folder.mkdir(parents=True)
        (folder / "part-0.dat").write_text("1|2|3\n")
    recorder = RecordingProgress()
    objects, _ = upload_tree(storage, tmp_path, progress=recorder)
    assert (objects, recorder.steps, recorder.advanced) == (3, [("uploading the raw objects", 3)], 3)
