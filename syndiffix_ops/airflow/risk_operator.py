"""RiskReportOperator: the KHLL privacy-risk report of configured source tables, as an Airflow task.

A thin shell over `syndiffix_ops.risk.assess_config`: it reads the source chunk by chunk (nothing is
written to any database), returns the coarse report (counts to 2 significant digits and at least tens,
shares to 0.001) as XCom, optionally writes it as JSON, and can fail the task when a column or quasi-identifier
combination is identifying, which turns a scheduled run into the "privacy regression test" of the KHLL
paper: a new, overly unique column stops the pipeline before it is copied anywhere.

Like the synthesis operator, it imports only the Task SDK at the top; the warehouse layer is imported in
`execute`, on the worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator


class RiskReportOperator(BaseOperator):
    """Assess how identifying the tables of a syndiffix-ops YAML config are (see docs/risk.md).

    :param config_path: the YAML config (read on the worker when the task runs).
    :param tables: names of the table entries to assess; default all.
    :param source_conn_id: Airflow connection of the source; default the config's `source_conn_id`,
        else its `source` URL.
    :param output_path: write the coarse report as JSON here (templated, e.g. with `{{ ds }}`).
    :param fail_on_identifying: fail the task when any assessed column set is "identifying" (at least
        the configured share of ids alone in their class), naming them all.
    """

    template_fields: Sequence[str] = ("config_path", "tables", "source_conn_id", "output_path")
    ui_color = "#fbeee8"

    def __init__(
        self,
        *,
        config_path: str,
        tables: Sequence[str] | None = None,
        source_conn_id: str | None = None,
        output_path: str | None = None,
        fail_on_identifying: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config_path = str(config_path)
        self.tables = list(tables) if tables else None
        self.source_conn_id = source_conn_id
        self.output_path = output_path
        self.fail_on_identifying = fail_on_identifying

    def execute(self, context: Any) -> dict[str, Any]:
        import json
        from pathlib import Path

        import sqlalchemy as sa

        from syndiffix_ops.airflow.hooks import connection_url
        from syndiffix_ops.config import load_config
        from syndiffix_ops.risk import assess_config, coarse

        config = load_config(self.config_path)
        conn_id = self.source_conn_id or config.source_conn_id
        source = sa.create_engine(connection_url(conn_id) if conn_id else sa.make_url(config.source_url()))
        try:
            # No progress logging: a running row count would put the exact source size in the task log.
            report = assess_config(config, tables=self.tables, source=source)
        finally:
            source.dispose()
        summary = coarse(report.to_dict())
        if self.output_path:
            path = Path(self.output_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(summary, indent=2), encoding="utf-8")
            self.log.info("risk report written to %s", path)
        identifying = [
            f"{table.table}: {'+'.join(s.columns)}"
            for table in report.tables
            for s in table.summaries
            if s.level == "identifying"
        ]
        if identifying:
            self.log.warning("identifying column sets: %s", "; ".join(identifying))
        if identifying and self.fail_on_identifying:
            raise ValueError(
                "identifying column sets (drop or pseudonymize them, or coarsen them before synthesis): "
                + "; ".join(identifying)
            )
        return summary
