"""The run coordinator dagster.yaml names: Dagster's run queue, with every run tagged by its table.

A job of the lake carries `lake/table` (runs.TABLE_TAG), which dagster.yaml's
`tag_concurrency_limits` uses to run one writer per table at a time and the UI's runs list
shows. A run of Dagster's implicit asset job (launched from the asset graph's Materialize
button, or by the automation sensor that refreshes the reports) has no job tags; this coordinator
adds the tag when the run is submitted, from the assets it materializes, before the queue reads
it. Adding tags at submission is the extension Dagster documents for a run coordinator ("run
attribution").
"""

from collections.abc import Iterable

import dagster as dg

from lake_assets.runs import TABLE_TAG

#: The first path component of the TPC-DS star's assets (and its reports'); its runs' table tag.
TPCDS = "tpcds"


def written_table(keys: Iterable[dg.AssetKey]) -> str | None:
    """The one lake table whose assets `keys` are (a declared table or the TPC-DS star), or None
    when they are of none (the ledger, a raw source) or of more than one."""
    from lake_assets.core.registry import declarations
    from lake_assets.core.tables import table_set

    owners = {kept.name: declaration.name for declaration in declarations()
              for kept in table_set(declaration).kept(declaration)}
    tables = {TPCDS if key.path[0] == TPCDS else owners.get(key.to_user_string()) for key in keys}
    return tables.pop() if len(tables) == 1 else None


class TableTaggingRunCoordinator(dg.QueuedRunCoordinator):
    """Dagster's queued run coordinator; a submitted run without `lake/table` gets the one its assets name."""

    def submit_run(self, context: dg.SubmitRunContext) -> dg.DagsterRun:
        run = context.dagster_run
        keys = set(run.asset_selection or ()) | {check.asset_key for check in run.asset_check_selection or ()}
        if TABLE_TAG not in run.tags and keys:
            table = written_table(keys)
            if table is not None:
                self._instance.add_run_tags(run.run_id, {TABLE_TAG: table})
        return super().submit_run(context)
