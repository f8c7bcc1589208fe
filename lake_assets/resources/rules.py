"""The Dagster resource for the lake's rules: how raw files are ingested and how long versions are kept.

Its fields are `settings.RulesSettings` (described there once), shown in the UI with the
other resources, and received by the assets and ops that apply them: the insurance apply
(`IngestRules`) and the maintenance job (the time-travel window vacuum keeps).
"""

import dagster as dg

from lake_assets.settings import LakeSettings, RulesSettings


class LakeRules(dg.ConfigurableResource, RulesSettings):
    """Ingestion and retention rules (see `RulesSettings` for what each field means)."""

    @classmethod
    def from_settings(cls, settings: LakeSettings) -> "LakeRules":
        return cls(**settings.rules.model_dump())
