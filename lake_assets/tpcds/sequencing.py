"""The sequence of every raw web_sales object (`SEQUENCE BY`, in core/sequence.py's format).

Day objects and corrections feed one table, so they share one sequence axis:

- a (key, ETag) the ledger already holds keeps the sequence it was recorded with, so a
  backfill, the sensor re-loading a day or a reapply never makes old content newer than
  the corrections applied after it;
- a correction named like AWS DMS names its files (YYYYMMDD-HHMMSSfff) is stamped with
  that time (its rows are changes of the source's clock);
- anything else (a day object, a correction named `fix.dat`) is stamped as of its
  arrival: just after the newest sequence applied to web_sales so far, as insurance's full
  loads are (`arrival_stamp`); the objects of one run follow each other in the order given
  (days by date, then the undated rows), one part number apart.

The delivery number counts the contents seen under an object key (1 for the first), so a
re-delivered DMS-named correction is newer than its first delivery. A correction's row
sequence is its object's base with its line number (`with_sequences`: several changes of
a key in one file apply in line order). A day object is a snapshot of its day at one
point: all its rows carry its prefix with row number `SNAPSHOT_ROW` (`with_row_sequences`),
whatever order the engine reads them in, so its valid lines are never numbered (a key
listed twice in one object is ranked by line only then, and its last line wins).
"""

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lake_assets.core.ledger import APPLIED, APPROVED, HELD, REJECTED, REVERTED
from lake_assets.core.raw_zone import RawObject
from lake_assets.core.sequence import ARRIVAL_PART, ROW_DIGITS, FileStamp, arrival_stamp, name_stamp

#: The row part of every row of a day object (after its base, which is row 0).
SNAPSHOT_ROW = f"{1:0{ROW_DIGITS}d}"
#: Statuses whose objects' sequences a new arrival must follow: reverted ones arrived before too,
#: and a rejected day object (every line bad) still applied its snapshot (its day's rows went).
_SEEN = (APPLIED, REJECTED, HELD, APPROVED, REVERTED)


@dataclass(frozen=True)
class ObjectSequence:
    """Where one object sits on the table's sequence axis."""

    base: str  # the sequence just before its first row (the ledger's `source_sequence`)
    by_arrival: bool  # stamped as of its arrival (no time of its own)

    @property
    def prefix(self) -> str:
        """The part of every row's sequence that is the object's."""
        return object_prefix(self.base)


def object_prefix(sequence: str) -> str:
    """The part of a row's sequence that is its object's (time, part, origin, delivery): all
    but the row number, in this format and in the one before it (which had no origin)."""
    return sequence[:-ROW_DIGITS]


def object_prefix_sql(column: str) -> str:
    """`object_prefix` of a column, in Spark SQL."""
    return f"substr({column}, 1, length({column}) - {ROW_DIGITS})"


def object_sequences(history: list[dict], objects: Sequence[RawObject],
                     named: bool = False) -> dict[str, ObjectSequence]:
    """The sequence of each of `objects` (by key), given the table's ledger `history` (oldest
    first). With `named`, an object whose name holds a DMS time is stamped with it."""
    recorded: dict[tuple[str, str], str] = {}
    etags: dict[str, set[str]] = {}
    newest: str | None = None
    latest: dict[tuple[str, str], dict] = {}
    for entry in history:
        key = (entry["source_file"], entry["source_etag"])
        latest[key] = entry
        etags.setdefault(entry["source_file"], set()).add(entry["source_etag"])
        if entry["source_sequence"] is not None:
            recorded.setdefault(key, entry["source_sequence"])  # the first one, whatever later entries say
    for key, entry in latest.items():
        if key in recorded and entry["status"] in _SEEN and (newest is None or recorded[key] > newest):
            newest = recorded[key]
    found: dict[str, ObjectSequence] = {}
    for obj in objects:
        if (obj.key, obj.etag) in recorded:
            base = recorded[(obj.key, obj.etag)]
            found[obj.key] = ObjectSequence(base, FileStamp.parse(base).part >= ARRIVAL_PART)
            continue
        delivery = len(etags.get(obj.key, set()) - {obj.etag}) + 1
        stamp = name_stamp(obj.key.rpartition("/")[2].rsplit(".", 1)[0]) if named else None
        if stamp is not None:
            found[obj.key] = ObjectSequence(stamp.of(obj.key).base(delivery), False)
            continue
        stamp = arrival_stamp(newest).of(obj.key)
        newest = stamp.base(delivery)
        found[obj.key] = ObjectSequence(newest, True)
    return found


def with_sequences(lines: DataFrame, prefixes: dict[str, str], source: str, line: str, sequence: str) -> DataFrame:
    """`lines` with `sequence`: its object's prefix (by the `source` column) and its `line`
    number, fixed width (compares as a string). A join with the small table of prefixes: a
    map literal of every loaded day would be rebuilt for every row."""
    table = lines.sparkSession.createDataFrame(list(prefixes.items()), f"{source} STRING, _prefix STRING")
    return (lines.join(F.broadcast(table), source)
            .withColumn(sequence, F.concat(F.col("_prefix"), F.lpad(F.col(line).cast("string"), ROW_DIGITS, "0")))
            .drop("_prefix"))



def with_row_sequences(rows: DataFrame, sequences: dict[str, str], source: str, sequence: str) -> DataFrame:
    """`rows` with `sequence`: the one sequence of its object (by the `source` column), by a
    join with the small table of them, as `with_sequences`."""
    table = rows.sparkSession.createDataFrame(list(sequences.items()), f"{source} STRING, {sequence} STRING")
    return rows.join(F.broadcast(table), source)
