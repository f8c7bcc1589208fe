"""The Dagster resource for the lake's rules: how raw files are ingested and how long versions are kept.

Fed from the settings (settings.py names each variable), shown in the UI with the other
resources, and received by the assets and ops that apply them: the insurance apply
(`IngestRules`) and the maintenance job (the time-travel window vacuum keeps).
"""

import dagster as dg

from lake_assets.settings import LakeSettings


class LakeRules(dg.ConfigurableResource):
    """Ingestion and retention rules (defaults as in settings.py)."""

    cdc_folder_date_format: str = LakeSettings.cdc_folder_date_format
    fullload_max_shrink: float = LakeSettings.fullload_max_shrink
    tombstone_retention_days: float = LakeSettings.tombstone_retention_days
    time_travel_hours: int = LakeSettings.time_travel_hours

    @classmethod
    def from_settings(cls, settings: LakeSettings) -> "LakeRules":
        return cls(cdc_folder_date_format=settings.cdc_folder_date_format,
                   fullload_max_shrink=settings.fullload_max_shrink,
                   tombstone_retention_days=settings.tombstone_retention_days,
                   time_travel_hours=settings.time_travel_hours)
