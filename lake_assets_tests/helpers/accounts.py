"""A small declared table for tests of the change core: `accounts_<random>`, keyed on `id`, with
a `balance`, fed by DMS-style CDC files under `raw/<name>/cdc/`."""

import uuid

from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.registry import parse


def accounts() -> TableDeclaration:
    name = f"accounts_{uuid.uuid4().hex[:6]}"
    return parse(f"""
name: {name}
group: accounts
keys: [id]
columns:
  - {{name: id, type: BIGINT, nullable: false}}
  - {{name: balance, type: BIGINT}}
sources:
  - {{prefix: raw/{name}/cdc/, kind: cdc}}
""", "test")
