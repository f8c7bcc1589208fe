"""Where each raw web_sales object sits on the sequence axis (pure Python, no server)."""

from lake_assets.core.raw_zone import RawObject
from lake_assets.tpcds.sequencing import object_sequences

DAY1, DAY2 = "raw/tpcds/web_sales/ws_sold_date=1998-01-02/part-00000.dat", \
    "raw/tpcds/web_sales/ws_sold_date=1998-01-03/part-00000.dat"
DMS, FIX = "raw/tpcds/web_sales_cdc/20240101-093000123.dat", "raw/tpcds/web_sales_cdc/fix.dat"


def entry(key: str, etag: str, sequence: str | None, status: str = "applied") -> dict:
    return {"source_file": key, "source_etag": etag, "source_sequence": sequence, "status": status}


def test_first_arrivals_follow_each_other_in_the_order_given() -> None:
    found = object_sequences([], [RawObject(DAY1, "a", 1), RawObject(DAY2, "b", 1)])
    assert found[DAY1].base == "00000000000000000.900000.0001.0000000000"
    assert found[DAY2].base == "00000000000000000.900001.0001.0000000000"
    assert found[DAY1].prefix == "00000000000000000.900000.0001." and found[DAY1].by_arrival


def test_dms_names_give_their_time_other_names_arrive_after_the_newest() -> None:
    history = [entry(DAY1, "a", "00000000000000000.900000.0001.0000000000")]
    found = object_sequences(history, [RawObject(DMS, "c", 1), RawObject(FIX, "d", 1)], named=True)
    assert found[DMS].base == "20240101093000123.000000.0001.0000000000" and not found[DMS].by_arrival
    assert found[FIX].base == "00000000000000000.900001.0001.0000000000" and found[FIX].by_arrival
    history.append(entry(DMS, "c", found[DMS].base))
    later = object_sequences(history, [RawObject(FIX, "d", 1), RawObject(DMS, "e", 1)], named=True)
    assert later[FIX].base == "20240101093000123.900000.0001.0000000000"  # after the DMS file applied
    assert later[DMS].base == "20240101093000123.000000.0002.0000000000"  # its re-delivery follows it


def test_a_recorded_object_keeps_its_first_sequence_a_new_content_arrives_anew() -> None:
    first = "00000000000000000.900000.0001.0000000000"
    history = [entry(DAY1, "a", first), entry(DMS, "c", "20240101093000123.000000.0001.0000000000"),
               entry(DAY1, "a", None, "reverted")]
    assert object_sequences(history, [RawObject(DAY1, "a", 1)])[DAY1].base == first  # backfill, reapply
    again = object_sequences(history, [RawObject(DAY1, "b", 1)])[DAY1]  # re-delivered: newer than the correction
    assert again.base == "20240101093000123.900000.0002.0000000000"
