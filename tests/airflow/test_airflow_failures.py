"""A failure no retry can fix ends the task in its first try (AirflowFailException); a lost connection
is retried. Run for real with dag.test() against PostgreSQL."""

from __future__ import annotations

import json
import socket

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.postgres, pytest.mark.slow]

CONFIG = """\
version: 1
source_conn_id: {source}
target_conn_id: syndiffix_target
target_schema: failures_target
dag:
  dag_id: {dag_id}
  default_args: {{retries: 2, retry_delay: 0}}
tables:
  - source: {table}
"""


def _task_instances(dag_id: str, run_id: str) -> dict[str, tuple[str, int]]:
    """task id -> (state, try number) of the run's task instances: the plan task and synthesize."""
    import sqlalchemy as sa
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        return {
            ti.task_id: (ti.state, ti.try_number)
            for ti in session.scalars(
                sa.select(TaskInstance).where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id)
            )
        }


def _run(airflow_env, run_dag, add_config_dag, dag_id: str, **fields):
    files = add_config_dag(airflow_env.dags_folder, dag_id, CONFIG.format(dag_id=dag_id, **fields))
    try:
        return run_dag(dag_id)
    finally:
        for file in files:
            file.unlink()


@pytest.mark.parametrize(
    ("table", "what"),
    [("demo.no_such_table", "missing table"), ("demo.planes\n    columns: [nope]", "column")],
)
def test_a_missing_table_or_column_fails_in_one_try_despite_retries(
    airflow_env, demo_source, run_dag, add_config_dag, table, what
):
    dag_id = f"syndiffix_fail_{'table' if 'no_such' in table else 'column'}"
    dag_run = _run(airflow_env, run_dag, add_config_dag, dag_id, source="syndiffix_source", table=table)
    assert dag_run.state == "failed"
    assert _task_instances(dag_id, dag_run.run_id) == {"plan": ("success", 1), "synthesize": ("failed", 1)}, (
        what
    )
    # The FAIL event names what the task was to read and write, as its START event did.
    events = [json.loads(line) for line in airflow_env.openlineage_file.read_text().splitlines()]
    [fail] = [
        e
        for e in events
        if e["eventType"] == "FAIL"
        and e["job"]["name"] == f"{dag_id}.synthesize"
        and e["run"]["facets"].get("airflow", {}).get("dagRun", {}).get("run_id") == dag_run.run_id
    ]
    source = table.split("\n")[0].split(".")[-1]
    assert [i["name"].split(".", 1)[1] for i in fail["inputs"]] == [f"demo.{source}"]
    assert [o["name"].split(".", 1)[1] for o in fail["outputs"]] == [f"failures_target.{source}"]
    assert fail["run"]["facets"]["syndiffix"]["lineageIds"] == []


def test_a_refused_connection_is_retried(airflow_env, demo_source, run_dag, add_config_dag, monkeypatch):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv(
        "AIRFLOW_CONN_CLOSED_PORT",
        json.dumps({"conn_type": "postgres", "host": "127.0.0.1", "port": port, "login": "postgres"}),
    )
    dag_id = "syndiffix_fail_connection"
    dag_run = _run(airflow_env, run_dag, add_config_dag, dag_id, source="closed_port", table="demo.planes")
    assert dag_run.state == "failed"
    instances = _task_instances(dag_id, dag_run.run_id)  # the plan task is the first to connect
    assert instances["plan"] == ("failed", 3) and instances["synthesize"][0] == "upstream_failed"


def test_an_undefined_connection_fails_in_one_try_and_names_it(
    airflow_env, demo_source, run_dag, add_config_dag, capfd
):
    dag_id = "syndiffix_fail_undefined_connection"
    dag_run = _run(airflow_env, run_dag, add_config_dag, dag_id, source="no_such_conn", table="demo.planes")
    assert dag_run.state == "failed"
    instances = _task_instances(dag_id, dag_run.run_id)
    assert instances["plan"] == ("failed", 1) and instances["synthesize"][0] == "upstream_failed"
    task_log = "".join(capfd.readouterr())
    assert "source: Airflow connection 'no_such_conn' is not defined" in task_log
