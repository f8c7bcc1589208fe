"""The one-line message for a registered table nobody has written yet says what builds it."""

from lake_assets.core.errors import UsageError
from lake_assets.core.tables import TPCDS_REPORTS, TableNotBuilt


def test_a_missing_report_says_how_it_gets_built() -> None:
    message = str(TableNotBuilt("tpcds.report_q12"))
    assert "tpcds.report_q12 does not exist yet" in message
    assert "after it loads" in message and "`lake run`" in message and "`lake status`" not in message
    assert all("reports are built" in str(TableNotBuilt(t.name)) for t in TPCDS_REPORTS)


def test_a_missing_curated_table_points_to_the_raw_zone_status() -> None:
    error = TableNotBuilt("insurance")
    assert isinstance(error, UsageError)  # the CLI's one-line message, exit code 2
    assert str(error) == "table insurance does not exist yet (nothing applied); see `lake status`"
