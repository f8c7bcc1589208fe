"""Compare query results from two engines: same rows, numbers equal to a tolerance, order ignored."""

from lake_assets.tpcds.report_checks import diff_rows


def assert_same_rows(actual: list[tuple], expected: list[tuple], label: str = "") -> None:
    differences = diff_rows(actual, expected)
    assert not differences, f"{label}: {differences[:5]}"
