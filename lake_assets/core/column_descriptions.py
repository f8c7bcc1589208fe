"""What each column of a table means, as its declaration says: the one source for the Dagster
UI's column schema and `lake query "DESCRIBE t"`'s comments (no Dagster, no engine here)."""

#: The audit columns every declared table's rows carry (core/apply/resolve.py's AUDIT).
AUDIT_DESCRIPTIONS = {"_operation": "I, U (CDC) or L (full load)", "_source_file": "Raw object the row came from",
                      "_source_line": "Line of the row in that object",
                      "_applied_at": "When the run applied the row",
                      "_sequence": "The change's sequence: file time.part.delivery.row"}


def column_descriptions(table_name: str) -> dict[str, str]:
    """Column -> description for the lake table `table_name`: a declared table's columns and audit
    columns, which its change feed and SCD2 history carry too; empty for any other table."""
    from lake_assets.core.registry import declarations

    for declaration in declarations():
        if table_name in (declaration.name, f"{declaration.name}_changes", f"{declaration.name}_history"):
            return {c.name: c.description for c in declaration.columns if c.description} | AUDIT_DESCRIPTIONS
    return {}
