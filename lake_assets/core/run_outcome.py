"""What one apply run did with its raw objects, in counts: files applied, refused and held, and
rows applied, superseded and quarantined. The run writes them into its table's materialization
metadata (declared/assets.py); `lake dev`'s line for the run reads them back (cli/dev_runs.py),
so a run that refused or quarantined data says so instead of a bare SUCCESS."""

from collections.abc import Iterable, Mapping
from dataclasses import astuple, dataclass, fields

from lake_assets.core.ledger_states import APPLIED, HELD, REJECTED


@dataclass(frozen=True)
class RunOutcome:
    files_applied: int = 0
    files_refused: int = 0
    files_held: int = 0
    rows_applied: int = 0
    rows_superseded: int = 0
    rows_quarantined: int = 0

    @classmethod
    def of_files(cls, files: Iterable) -> "RunOutcome":  # Iterable[LedgerEntry]
        """The counts of a run's ledger entries (one per raw object it took in)."""
        entries = list(files)
        return cls(sum(e.status == APPLIED for e in entries), sum(e.status == REJECTED for e in entries),
                   sum(e.status == HELD for e in entries), sum(e.rows_applied for e in entries),
                   sum(e.rows_superseded for e in entries), sum(e.rows_quarantined for e in entries))

    def as_metadata(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_metadata(cls, values: Mapping[str, object]) -> "RunOutcome | None":
        """The outcome in a materialization's metadata (values plain or with a `.value`), or None
        when it carries none (an asset that is not a declared table's)."""
        if not all(f.name in values for f in fields(cls)):
            return None
        return cls(*(int(getattr(values[f.name], "value", values[f.name])) for f in fields(cls)))  # type: ignore[call-overload]

    def __add__(self, other: "RunOutcome") -> "RunOutcome":
        return RunOutcome(*(a + b for a, b in zip(astuple(self), astuple(other))))

    @property
    def marks(self) -> list[str]:
        """What a person must look at: data refused, rows quarantined, a file held for approval."""
        return [mark for mark, count in (("refused", self.files_refused), ("quarantined", self.rows_quarantined),
                                         ("held", self.files_held)) if count]

    def describe(self) -> str:
        return (f"files {self.files_applied} applied, {self.files_refused} refused, {self.files_held} held; "
                f"rows {self.rows_applied} applied, {self.rows_superseded} superseded, "
                f"{self.rows_quarantined} quarantined")
