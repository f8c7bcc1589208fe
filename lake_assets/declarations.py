"""The lake's declared tables: each one a `TableDeclaration` (core/declaration.py).

The change core applies them, and `definitions.py` makes each one's assets, checks, sensor and
job from its declaration alone.
"""

from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.errors import UsageError
from lake_assets.insurance.declaration import INSURANCE

DECLARATIONS: tuple[TableDeclaration, ...] = (INSURANCE,)


def declaration(name: str) -> TableDeclaration:
    """The declaration of the table called `name`."""
    for declared in DECLARATIONS:
        if declared.name == name:
            return declared
    raise UsageError(f"{name} is not a declared table; declared: {', '.join(d.name for d in DECLARATIONS)}")
