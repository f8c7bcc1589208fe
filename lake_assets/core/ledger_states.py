"""The states of a raw object in the ingestion ledger (core/ledger.py says what each means), in a
module of their own: readers that only name them (`lake status`'s summary) load no Arrow."""

APPLIED = "applied"
REJECTED = "rejected"
HELD = "held"
APPROVED = "approved"
REVERTED = "reverted"
FINAL = (APPLIED, REJECTED)
