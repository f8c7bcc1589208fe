"""The sequenced-change rule of tpcds.web_sales in plain Python: the oracle of the TPC-DS tests.

A key takes a change only if it is at least as new as its row and its tombstone; within one
run the newest change per key is the candidate. A day object is a snapshot of its day as of
its floor: its rows are upserts, and the day's keys in the table older than the floor that
the run does not upsert are deleted (tombstoned at the floor). Rows are the raw fields as
text (34 TPC-DS columns), sequences the fixed-width strings of core/sequence.py.
"""

from dataclasses import dataclass, field

ITEM, ORDER, SOLD = 3, 17, 0  # positions of the key columns and the sold date key in a web_sales line
Key = tuple[str, str]


def key_of(fields: list[str]) -> Key:
    return fields[ITEM], fields[ORDER]


@dataclass(frozen=True)
class Change:
    obj: str  # the object it came from
    sequence: str
    fields: list[str]
    delete: bool = False

    @property
    def key(self) -> Key:
        return key_of(self.fields)


@dataclass
class Model:
    rows: dict[Key, tuple[list[str], str]] = field(default_factory=dict)  # key -> (fields, sequence)
    tombstones: dict[Key, str] = field(default_factory=dict)

    def run(self, changes: list[Change], floors: dict[str, tuple[str, str]] | None = None) -> dict[str, int]:
        """Apply one run's changes and day snapshots (`floors`: object -> (sold date key as
        text, '' for the undated rows; floor)); return the changes applied per object."""
        newest: dict[Key, Change] = {}
        for change in changes:
            if change.key not in newest or change.sequence > newest[change.key].sequence:
                newest[change.key] = change
        applied: dict[str, int] = {}
        before = dict(self.rows)
        for key, change in newest.items():
            row = self.rows.get(key)
            if change.sequence < max(row[1] if row else "", self.tombstones.get(key, "")):
                continue
            applied[change.obj] = applied.get(change.obj, 0) + 1
            if change.delete:
                self.rows.pop(key, None)
                self.tombstones[key] = max(self.tombstones.get(key, ""), change.sequence)
            else:
                self.rows[key] = (change.fields, change.sequence)
        upserted = {k for k, c in newest.items() if self.rows.get(k, (None, None))[1] == c.sequence}
        for day, floor in (floors or {}).values():
            for key, (fields, sequence) in before.items():
                if fields[SOLD] == day and sequence < floor and key not in upserted and key in self.rows:
                    del self.rows[key]
                    self.tombstones[key] = max(self.tombstones.get(key, ""), floor)
        return applied

    def table(self) -> dict[Key, list[str]]:
        return {key: fields for key, (fields, _) in self.rows.items()}
