"""Reports under any Airflow ObjectStoragePath: a DAG run writing them to an fsspec memory filesystem,
one report per table and run plus the index, and the task's extra link naming its run's report."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.postgres, pytest.mark.slow]

DAG_ID = "syndiffix_report_storage"
CONFIG = f"""\
version: 1
source_conn_id: syndiffix_source
target_conn_id: syndiffix_target
target_schema: report_storage
dag:
  dag_id: {DAG_ID}
tables:
  - source: demo.planes
    columns: [year, engines, seats]
"""
DESTINATION = "memory://syndiffix-test/reports"


def test_two_runs_keep_two_reports_in_object_storage_and_each_task_links_to_its_own(
    airflow_env, demo_source, run_dag, add_config_dag
):
    from airflow.models.xcom import XComModel
    from airflow.sdk import ObjectStoragePath
    from airflow.utils.session import create_session
    from sqlalchemy import select

    files = add_config_dag(airflow_env.dags_folder, "report_storage", CONFIG, report_dir=DESTINATION)
    try:
        # dag.test runs the tasks in this process, so they see this process's memory filesystem.
        runs = [run_dag(DAG_ID), run_dag(DAG_ID)]
    finally:
        for file in files:
            file.unlink()
    assert [run.state for run in runs] == ["success", "success"]

    links = []
    for run in runs:
        with create_session() as session:
            link = session.scalar(
                select(XComModel.value).where(
                    XComModel.dag_id == DAG_ID,
                    XComModel.run_id == run.run_id,
                    XComModel.key == "_link_SyntheticReportLink",
                )
            )
        links.append(link)
    assert len(set(links)) == 2 and all(link.startswith(f"{DESTINATION}/") for link in links)
    root = ObjectStoragePath(DESTINATION)
    pages = sorted(str(p) for p in root.glob("*/*.html"))
    assert pages == sorted(links)
    for link in links:
        assert "<img" in ObjectStoragePath(link).read_text(encoding="utf-8")
    index = (root / "index.html").read_text(encoding="utf-8")
    assert all(link.removeprefix(f"{DESTINATION}/") in index for link in links)
