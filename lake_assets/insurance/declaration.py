"""The `insurance` table, declared: the seed's policy contract, fed by AWS DMS style drops.

A full load (a snapshot of every policy, with a header) lands in `raw/fullload/`, CDC files
(no header, the operation `I`/`U`/`D` first) in `raw/cdcload/`. Contract v1 follows the seed's
Glue script; v2 adds the seed's optional `is_flagged` (rows written before it, and files of
v1's shape, read it as NULL).
"""

from lake_assets.core.declaration import Column, RefusalReason, Source, SourceKind, TableDeclaration



def flag(name: str, description: str) -> Column:
    """A Y/N coverage flag (any case in the raw file, stored upper-case)."""
    return Column(name=name, type="STRING", allowed=("Y", "N"), reason=RefusalReason.BAD_FLAG, description=description)


INSURANCE = TableDeclaration(
    name="insurance",
    description="curated insurance policies (full load + CDC)",
    group="insurance",
    owners=("team:data-engineering",),
    columns=(
        Column(name="policy_id", type="INT", nullable=False, minimum=0, minimum_reason=RefusalReason.NEGATIVE_KEY,
               description="Policy number: the key, unique and never null"),
        Column(name="expiry_date", type="DATE", description="Date that the policy expires"),
        Column(name="location_name", type="STRING", description="Location type (Urban or Rural)"),
        Column(name="state_code", type="STRING", description="State where the property is located"),
        Column(name="region_name", type="STRING", description="Geographic region where the property is located"),
        Column(name="insured_value", type="INT", description="Property value"),
        Column(name="business_type", type="STRING",
               description="Business use of the property, such as Farming or Retail"),
        flag("earthquake_coverage", "Is earthquake coverage included (Y or N)"),
        flag("flood_coverage", "Is flood coverage included (Y or N)"),
        Column(name="is_flagged", type="BOOLEAN", since=2,
               description="Flagged for review (true/false); NULL for rows from before v2"),
    ),
    keys=("policy_id",),
    sources=(
        Source(prefix="raw/fullload/", kind=SourceKind.SNAPSHOT),
        Source(prefix="raw/cdcload/", kind=SourceKind.CDC),
    ),
)
