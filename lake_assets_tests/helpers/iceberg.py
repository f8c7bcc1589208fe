"""Iceberg test helpers: clean namespaces between tests (tests share one catalog per session)."""

from lake_assets.resources.catalog import LakeCatalog


def drop_namespace_tables(catalog: LakeCatalog, namespace: str) -> None:
    """Drop every table in `namespace` so the next test starts empty."""
    catalog.drop_namespace(namespace)
