"""Where each raw web_sales object sits on the sequence axis (pure Python, no server)."""

from lake_assets.core.raw_zone import RawObject
from lake_assets.core.sequence import origin
from lake_assets.tpcds.sequencing import object_prefix, object_sequences

DAY1, DAY2 = "raw/tpcds/web_sales/ws_sold_date_sk=2450816/part-00000.dat", \
    "raw/tpcds/web_sales/ws_sold_date_sk=2450817/part-00000.dat"
DMS, FIX = "raw/tpcds/web_sales_cdc/20240101-093000123.dat", "raw/tpcds/web_sales_cdc/fix.dat"
ZERO = "0" * 23
DMS_TIME = "20240101093000123000000"


def entry(key: str, etag: str, sequence: str | None, status: str = "applied") -> dict:
    return {"source_file": key, "source_etag": etag, "source_sequence": sequence, "status": status}


def test_first_arrivals_follow_each_other_in_the_order_given() -> None:
    found = object_sequences([], [RawObject(DAY1, "a", 1), RawObject(DAY2, "b", 1)])
    assert found[DAY1].base == f"{ZERO}.900000.{origin(DAY1)}.0001.0000000000"
    assert found[DAY2].base == f"{ZERO}.900001.{origin(DAY2)}.0001.0000000000"
    assert found[DAY1].prefix == f"{ZERO}.900000.{origin(DAY1)}.0001." and found[DAY1].by_arrival


def test_dms_names_give_their_time_other_names_arrive_after_the_newest() -> None:
    history = [entry(DAY1, "a", f"{ZERO}.900000.{origin(DAY1)}.0001.0000000000")]
    found = object_sequences(history, [RawObject(DMS, "c", 1), RawObject(FIX, "d", 1)], named=True)
    assert found[DMS].base == f"{DMS_TIME}.000000.{origin(DMS)}.0001.0000000000" and not found[DMS].by_arrival
    assert found[FIX].base == f"{ZERO}.900001.{origin(FIX)}.0001.0000000000" and found[FIX].by_arrival
    history.append(entry(DMS, "c", found[DMS].base))
    later = object_sequences(history, [RawObject(FIX, "d", 1), RawObject(DMS, "e", 1)], named=True)
    assert later[FIX].base == f"{DMS_TIME}.900000.{origin(FIX)}.0001.0000000000"  # after the DMS file applied
    assert later[DMS].base == f"{DMS_TIME}.000000.{origin(DMS)}.0002.0000000000"  # its re-delivery follows it


def test_sequences_recorded_by_the_earlier_release_are_kept_and_followed() -> None:
    """A lake written before sequences had an origin and nanoseconds: a recorded object keeps
    its first sequence (its rows' prefix is all but their row number), new content arrives
    after the newest recorded one."""
    first = "00000000000000000.900000.0001.0000000000"
    history = [entry(DAY1, "a", first), entry(DMS, "c", "20240101093000123.000000.0001.0000000000"),
               entry(DAY1, "a", None, "reverted")]
    kept = object_sequences(history, [RawObject(DAY1, "a", 1)])[DAY1]  # backfill, reapply
    assert kept.base == first and kept.prefix == object_prefix(first) == "00000000000000000.900000.0001."
    assert kept.by_arrival
    again = object_sequences(history, [RawObject(DAY1, "b", 1)])[DAY1]  # re-delivered: newer than the correction
    assert again.base == f"{DMS_TIME}.900000.{origin(DAY1)}.0002.0000000000"
    assert again.base > "20240101093000123.000000.0001.0000000000"
