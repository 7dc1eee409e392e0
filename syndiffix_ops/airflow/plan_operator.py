"""RunPlanOperator: the first task of a DAG run, which reads the keys the source declares and plans the
run's `synthesize` instances (dynamic task mapping), so parsing the DAG never touches a database.

The plan is planned as `syndiffix-ops run` plans it (syndiffix_ops.run_plan): tables joined by the
YAML's keys or the source's form a linked set, one task instance each; every other table (or column
set) is an instance of its own. Its return value, the mapped task's expand_kwargs, holds table names
only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator


class RunPlanOperator(BaseOperator):
    """Plan a config's run with the keys its source declares; returns one kwargs dict per instance.

    :param config_path: the YAML config (read on the worker when the task runs).
    :param source_conn_id: Airflow connection of the source; default the config's `source_conn_id`.
    """

    template_fields: Sequence[str] = ("config_path", "source_conn_id")
    ui_color = "#f4f8fd"

    def __init__(self, *, config_path: str, source_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config_path = str(config_path)
        self.source_conn_id = source_conn_id

    def execute(self, context: Any) -> list[dict[str, Any]]:
        from syndiffix_ops.airflow.operators import failing_at_once_when_permanent

        with failing_at_once_when_permanent():
            return self._plan()

    def _plan(self) -> list[dict[str, Any]]:
        import sqlalchemy as sa

        from syndiffix_ops.airflow.dag_factory import task_kwargs
        from syndiffix_ops.airflow.operators import source_url
        from syndiffix_ops.config import load_config
        from syndiffix_ops.run_plan import database_key_reader, plan_run

        config = load_config(self.config_path)
        source = sa.create_engine(source_url(config, self.source_conn_id))
        try:
            plan = plan_run(config, database_key_reader(source))
        finally:
            source.dispose()
        for linked_set in plan.linked_sets:
            keys = [f"{t} {fk.label}" for t in linked_set.tables for fk in linked_set.keys[t].foreign_keys]
            self.log.info(
                "linked set %s (parents first), one task instance; foreign keys: %s",
                ", ".join(linked_set.tables),
                "; ".join(keys) or "none",
            )
        if plan.single_tables:
            self.log.info(
                "tables written alone, one task instance per output: %s", ", ".join(plan.single_tables)
            )
        return task_kwargs(config, plan)
