"""Raw objects that are not text: refused whole, and blocking nothing else (no Dagster).

The raw contract is UTF-8 text. Sail's text reader fails a whole read on one byte that is
not UTF-8 (`Parser error: Encountered invalid UTF-8 data`), so one gzip'd day object failed
the web_sales step, and with it every other pending object, run after run. A read that
fails on its encoding is therefore done again without the objects the engine cannot read:
they are found by halving the set, each half read on its own (k such objects of n cost
about 2k·log2(n) reads; none when no read fails), and each is refused whole, `bad_encoding`
in the ledger and `lake status`, naming gzip when the object starts with gzip's magic bytes.
JVM Spark's reader decodes such bytes as U+FFFD instead: the parse quarantines each of those
lines by its shape (a `|`-separated line of numbers does not survive compression), and a day
left with no valid line is held by the snapshot guard.
"""

from collections.abc import Callable
from typing import TypeVar

from lake_assets.core.raw_zone import RawObject
from lake_assets.resources.storage import LakeStorage

BAD_ENCODING = "bad_encoding"
GZIP_MAGIC = b"\x1f\x8b"

Result = TypeVar("Result")
Objects = dict[str, RawObject]


def is_encoding_error(error: BaseException) -> bool:
    """Whether the engine failed a read on bytes that are not UTF-8."""
    text = str(error).lower()
    return "utf-8" in text or "utf8" in text


def read_or_refuse(objects: Objects, read: Callable[[Objects], Result],
                   readable: Callable[[Objects], bool]) -> tuple[Result, Objects]:
    """`read(objects)`, and no object refused; or, when that fails on the encoding, `read` of the
    objects `readable` accepts, and the others (by the keys of `objects`)."""
    try:
        return read(objects), {}
    except Exception as error:  # the engine's own error class
        if not is_encoding_error(error):
            raise
        refused = _unreadable(objects, readable, known=True)
        if not refused:
            raise
    return read({name: obj for name, obj in objects.items() if name not in refused}), refused


def _unreadable(objects: Objects, readable: Callable[[Objects], bool], known: bool = False) -> Objects:
    """The objects that `readable` refuses alone, found by halving (`known`: the whole set is refused)."""
    if not objects or (not known and readable(objects)):
        return {}
    if len(objects) == 1:
        return dict(objects)
    names = list(objects)
    half = len(names) // 2
    return {**_unreadable({n: objects[n] for n in names[:half]}, readable),
            **_unreadable({n: objects[n] for n in names[half:]}, readable)}


def refusal(storage: LakeStorage, obj: RawObject) -> str:
    """The ledger's detail of an object refused for its bytes (two of them read, for gzip's magic)."""
    compressed = storage.get_bytes(obj.key, length=len(GZIP_MAGIC))[0] == GZIP_MAGIC
    return (f"{BAD_ENCODING}: {'gzip-compressed, ' if compressed else ''}not UTF-8 text: refused whole, nothing of "
            "it loaded; deliver it as plain `|`-separated UTF-8 text")
