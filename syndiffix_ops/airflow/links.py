"""The task's "Quality report" button: from a SyntheticTableOperator task instance to its run's report."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink


class SyntheticReportLink(BaseOperatorLink):
    """The report of the table the task wrote in this run (the reports' index when it wrote several).

    Airflow asks for the link when the task ends, on the worker, and keeps it with the task instance, so
    the link names this run's report even after later runs wrote theirs.
    """

    name = "Quality report"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        urls = list(getattr(operator, "report_urls", {}).values())
        if len(urls) == 1:
            return urls[0]
        return getattr(operator, "report_index_url", None) or "" if urls else ""
