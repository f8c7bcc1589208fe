"""The reader fetches small objects several at once and large ones alone, in the order it was
given them, and reads from the lake's S3 exactly the bytes of each object with their ETag."""

import threading

import pytest

from lake_assets.core.apply import reader
from lake_assets.core.apply.reader import ObjectToRead, _Fetched, fetched, s3_fetch
from lake_assets.core.declaration import SourceKind
from lake_assets.resources.storage import LakeStorage


def _objects(sizes: list[int]) -> list[ObjectToRead]:
    return [ObjectToRead(i, f"raw/t/{i:03d}.csv", SourceKind.CDC, "p", None, size) for i, size in enumerate(sizes)]


@pytest.mark.unit
def test_small_objects_are_fetched_together_and_a_large_one_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "GROUP_BYTES", 300)  # three small objects of 100 bytes to a group
    small, large = 100, reader.SMALL_OBJECT_BYTES + 1
    objects = _objects([small] * 7 + [large] + [small] * 2 + [large, large] + [small])
    lock, running, seen = threading.Lock(), [], []  # what was being fetched when each fetch started

    def fetch(obj: ObjectToRead) -> _Fetched:
        with lock:
            running.append(obj.index)
            seen.append((obj.index, set(running)))
        threading.Event().wait(0.05)
        with lock:
            running.remove(obj.index)
        return _Fetched(f"bytes of {obj.key}".encode(), f"etag-{obj.index}")

    out = list(fetched(fetch, objects))
    assert [obj.index for obj, _ in out] == list(range(len(objects)))  # in the order given
    assert all(got.data == f"bytes of {obj.key}".encode() for obj, got in out)
    together = {index: others for index, others in seen}
    for index, obj in enumerate(objects):
        if obj.size == large:
            assert together[index] == {index}, together  # alone: two large objects are never held at once
    # the first group's three were fetched at once; none of the next group's began before they were handed on
    assert max(len(together[i]) for i in (0, 1, 2)) == 3
    assert all(together[i] <= {3, 4, 5} for i in (3, 4, 5)) and together[6] == {6}, together


@pytest.mark.unit
def test_nothing_to_fetch_gives_nothing() -> None:
    assert list(fetched(lambda obj: _Fetched(), [])) == []


def test_s3_fetch_reads_an_object_whole_with_its_etag(storage: LakeStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    key, secret = storage.credentials()  # the engine's own environment holds them
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    listed = b"1,one\n2,two\n"
    storage.put_bytes("raw/t/a.csv", listed)
    storage.put_bytes("raw/t/b.csv", b"3,three\n" * 50_000)
    (a,) = [o for o in storage.list_objects("raw/t/") if o["Key"] == "raw/t/a.csv"]
    fetch = s3_fetch(storage.endpoint_url, storage.bucket, storage.region)

    got = fetch(ObjectToRead(0, "raw/t/a.csv", SourceKind.CDC, "p", None, int(a["Size"])))
    assert (got.data, got.etag, got.error) == (listed, a["ETag"].strip('"'), None)

    # replaced by a longer object after it was listed: still read whole, with the new ETag
    longer = listed + b"3,three\n"
    storage.put_bytes("raw/t/a.csv", longer)
    got = fetch(ObjectToRead(0, "raw/t/a.csv", SourceKind.CDC, "p", None, int(a["Size"])))
    assert got.data == longer and got.etag != a["ETag"].strip('"') and got.error is None

    big = fetch(ObjectToRead(1, "raw/t/b.csv", SourceKind.CDC, "p", None, 8 * 50_000))
    assert big.data == b"3,three\n" * 50_000

    gone = fetch(ObjectToRead(2, "raw/t/gone.csv", SourceKind.CDC, "p", None, 10))
    assert gone.data == b"" and gone.error is not None and "raw/t/gone.csv" in gone.error
