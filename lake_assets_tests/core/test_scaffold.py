"""`lake table add`'s guess from a sample: a byte order mark before the header is not part of it."""

import pytest

from lake_assets.core.scaffold import guess

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("mark", [b"", b"\xef\xbb\xbf"])
def test_a_header_after_a_byte_order_mark_names_the_columns(mark: bytes) -> None:
    found = guess(mark + b"order_id,status,amount\n1001,NEW,120.00\n1002,PAID,35.50\n")
    assert found.header and found.columns == [("order_id", "INT"), ("status", "STRING"), ("amount", "DOUBLE")]
    assert found.key == "order_id"
