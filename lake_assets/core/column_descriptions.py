"""What each column of a table means, as its declaration says: the one source for the Dagster
UI's column schema and `lake query "DESCRIBE t"`'s comments (no Dagster, no engine here)."""

#: The audit columns every declared table's rows carry (core/apply/resolve.py's AUDIT).
AUDIT_DESCRIPTIONS = {"_operation": "I, U (CDC) or L (full load)", "_source_file": "Raw object the row came from",
                      "_source_line": "Line of the row in that object",
                      "_applied_at": "When the run applied the row",
                      "_sequence": "The change's sequence: file time.part.delivery.row"}
#: The column the star's web_sales rows carry after TPC-DS's (tpcds/schema.py).
STAR_FACT_DESCRIPTIONS = {"_sequence": "The sequence of the change that wrote the row: orders a key's day loads and "
                                  "corrections"}
#: The columns a change feed adds to its table's (core/change_feed.py), with their UI types.
FEED_COLUMNS = {
    "_change_type": ("string", "insert, update_preimage, update_postimage or delete"),
    "_commit_version": ("bigint", "The table version that made the change"),
    "_commit_timestamp": ("timestamp", "When that version was committed"),
}
#: The columns an SCD2 history adds to its table's (core/apply/history.py), with their UI types.
HISTORY_COLUMNS = {
    "valid_to_sequence": ("string", "The key's next change (its sequence), where this version ends; NULL while "
                                    "current; a delete's own sequence on a delete"),
    "valid_from": ("timestamp", "The time of `_sequence` (NULL for a snapshot stamped as of its arrival)"),
    "valid_to": ("timestamp", "The time of `valid_to_sequence`"),
    "is_current": ("boolean", "The key's live row (the table holds it)"),
    "commit_version": ("bigint", "The table version the recording run left"),
}
#: A quarantine's columns (core/quarantine.py), every domain's.
QUARANTINE_DESCRIPTIONS = {
    "source_file": "The raw object the refused record came from",
    "source_etag": "The ETag of the bytes read (a re-delivery under the same name has its own)",
    "line_number": "Line of the record in that object (its first line, for a record spanning lines)",
    "reason": "Why it was not applied (a reason code: bad_value, wrong_field_count, ...)",
    "detail": "The column and value, or what the parser found",
    "raw_text": "The record as it was in the file",
    "run_id": "The Dagster run that quarantined it",
    "quarantined_at": "When that run recorded it",
}
#: A declared table's tombstones' columns after its keys (core/apply/bookkeeping.py).
TOMBSTONE_DESCRIPTIONS = {
    "_sequence": "Sequence of the key's last delete: a change older than it does not bring the key back",
    "source_file": "The raw object that deleted the key (a CDC delete, or a snapshot that left it out)",
    "source_line": "Line of the delete in that object (NULL for a snapshot's delete: the key is not in it)",
    "deleted_at": "When the run recorded the delete; the retention window counts from it",
}


def column_descriptions(table_name: str) -> dict[str, str]:
    """Column -> description for the lake table `table_name`: a declared table's columns and audit
    columns, which its change feed and SCD2 history carry too with their own; its quarantine's and
    tombstones'; every quarantine's; empty for any other table."""
    from lake_assets.core.registry import declarations, star_declarations

    namespace, _, star_table = table_name.partition(".")
    if namespace == "tpcds" and star_table in star_declarations():  # the star's own
        described = {c.name: c.description for c in star_declarations()[star_table].columns if c.description}
        # web_sales carries its loader's `_sequence` (tpcds/); a dimension the change core's audit columns
        return described | (STAR_FACT_DESCRIPTIONS if star_table == "web_sales" else AUDIT_DESCRIPTIONS)
    for declaration in declarations():
        described = {c.name: c.description for c in declaration.columns if c.description}
        added = {f"{declaration.name}_changes": FEED_COLUMNS, f"{declaration.name}_history": HISTORY_COLUMNS}
        if table_name == declaration.name or table_name in added:
            own = {name: description for name, (_, description) in added.get(table_name, {}).items()}
            return described | AUDIT_DESCRIPTIONS | own
        if table_name == f"{declaration.name}_tombstones":
            return {k: described[k] for k in declaration.keys if k in described} | TOMBSTONE_DESCRIPTIONS
    return dict(QUARANTINE_DESCRIPTIONS) if table_name.endswith("_quarantine") else {}
