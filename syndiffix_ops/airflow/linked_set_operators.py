"""The tasks of a linked set's task group: one step per table, parents first, then publish and discard.

Thin shells over syndiffix_ops.linked_steps, with what SyntheticTableOperator adds (connections, the
salt, reports, Asset events, OpenLineage):

- LinkedTableStepOperator: synthesizes one table of the set, links it to its parents' staged rows and
  stages it in the target (`syndiffix_staging`). It writes no target table: its OpenLineage events
  name the source tables it reads (the whole set's: a table's link statistics come from its children)
  and no output.
- PublishLinkedSetOperator: writes the whole set from the staged rows as one unit, with lineage,
  reports and Asset events; its OpenLineage events name every table of the set, as the one-task set's.
- DiscardStagedSetOperator: the group's teardown; removes what the run staged for the set when the
  run ends without publishing it (after a publish nothing is left).

The staged rows are keyed by DAG id, run id and set, so a retried step finds its parents' rows and
redoes only itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from syndiffix_ops.airflow.operators import SyntheticTableOperator, failing_at_once_when_permanent

if TYPE_CHECKING:
    from syndiffix_ops.airflow.openlineage_facets import TaskPlan
    from syndiffix_ops.config import PipelineConfig
    from syndiffix_ops.run_result import AirflowIds, TableRunResult


def staging_run(airflow: AirflowIds) -> str:
    """The key of a DAG run's staged rows: its DAG id and run id."""
    return f"{airflow.dag_id}/{airflow.run_id}"


class LinkedTableStepOperator(SyntheticTableOperator):
    """Synthesize `table` of `linked_set` and stage it for its children and the publish task.

    Takes SyntheticTableOperator's arguments; `linked_set` (the set's tables, parents first) is required.
    """

    ui_color = "#eef6ee"

    def _run(self, config: PipelineConfig, table: Any, **arguments: Any) -> list[TableRunResult]:
        from syndiffix_ops.linked_steps import stage_linked_table

        linked_set = self._checked_set(config, table, arguments["source"])
        arguments.pop("report_dir")
        rows = stage_linked_table(
            config, linked_set, table.display_name, run=staging_run(arguments["airflow"]), **arguments
        )
        self.log.info(
            "%s: staged %d synthetic rows for linked set %s", table.display_name, rows, linked_set.name
        )
        return []

    def _lineage_plan(self) -> TaskPlan:
        return dataclasses.replace(super()._lineage_plan(), step_table=self.table)


class PublishLinkedSetOperator(SyntheticTableOperator):
    """Write `linked_set` (its first table is `table`) from the rows its steps staged, as one unit."""

    ui_color = "#e8f1fb"

    def _run(self, config: PipelineConfig, table: Any, **arguments: Any) -> list[TableRunResult]:
        from syndiffix_ops.linked_steps import publish_linked_set

        linked_set = self._checked_set(config, table, arguments["source"])
        return publish_linked_set(config, linked_set, run=staging_run(arguments["airflow"]), **arguments)


class DiscardStagedSetOperator(BaseOperator):
    """Remove the rows this DAG run staged for the linked set named `linked_set` (its first table).

    :param config_path: the YAML config (its target schema).
    :param target_conn_id: Airflow connection of the target; default the config's `target_conn_id`.
    """

    template_fields: Sequence[str] = ("config_path", "target_conn_id")
    ui_color = "#f4f4f4"

    def __init__(
        self, *, config_path: str, linked_set: str, target_conn_id: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.config_path = str(config_path)
        self.linked_set = linked_set
        self.target_conn_id = target_conn_id

    def execute(self, context: Any) -> None:
        import sqlalchemy as sa

        from syndiffix_ops.airflow.operators import target_url
        from syndiffix_ops.config import load_config
        from syndiffix_ops.linked_steps import discard_linked_set
        from syndiffix_ops.run_result import AirflowIds

        with failing_at_once_when_permanent():
            config = load_config(self.config_path)
            target = sa.create_engine(target_url(config, self.target_conn_id))
            ids = AirflowIds(dag_id=context["ti"].dag_id, task_id=self.task_id, run_id=context["run_id"])
            try:
                discard_linked_set(target, config.target_schema, self.linked_set, run=staging_run(ids))
            finally:
                target.dispose()

    def get_openlineage_facets_on_start(self):
        from airflow.providers.openlineage.extractors import OperatorLineage

        return OperatorLineage()  # it reads and writes no dataset, only the run's staged rows
