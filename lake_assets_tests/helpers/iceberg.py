"""Iceberg test helpers: clean namespaces between tests (tests share one catalog per session)."""

from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

from lake_assets.resources.catalog import LakeCatalog


def drop_namespace_tables(catalog: LakeCatalog, namespace: str) -> None:
    """Drop every table in `namespace` (purging its files) so the next test starts empty."""
    client = catalog.pyiceberg()
    try:
        identifiers = client.list_tables(namespace)
    except NoSuchNamespaceError:
        return
    for identifier in identifiers:
        try:
            client.purge_table(identifier)
        except NoSuchTableError:
            pass
        except Exception:  # noqa: BLE001 - a catalog without purge support still drops
            client.drop_table(identifier)
