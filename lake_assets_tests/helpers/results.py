"""Compare query results from two engines: same rows, numbers equal to a tolerance, order ignored."""

import datetime as dt
import decimal
import math


def _plain(value: object) -> object:
    if isinstance(value, (decimal.Decimal, float)) or (isinstance(value, int) and not isinstance(value, bool)):
        return float(value)
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    return value


def normalised(rows: list[tuple]) -> list[tuple]:
    plain = [tuple(_plain(v) for v in row) for row in rows]
    return sorted(plain, key=lambda row: tuple(("" if v is None else str(round(v, 4) if isinstance(v, float) else v))
                                                for v in row))


def assert_same_rows(actual: list[tuple], expected: list[tuple], label: str = "") -> None:
    """Equal as multisets; floats and decimals compared with a relative tolerance of 1e-9."""
    left, right = normalised(actual), normalised(expected)
    assert len(left) == len(right), f"{label}: {len(left)} rows, expected {len(right)}"
    for a, e in zip(left, right):
        assert len(a) == len(e), f"{label}: row {a} vs {e}"
        for x, y in zip(a, e):
            if isinstance(x, float) and isinstance(y, float):
                assert math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-6), f"{label}: {a} vs {e}"
            else:
                assert x == y, f"{label}: {a} vs {e}"
