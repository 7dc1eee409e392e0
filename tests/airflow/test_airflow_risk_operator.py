"""RiskReportOperator in a real Airflow run (dag.test()) against the test PostgreSQL."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

pytestmark = pytest.mark.airflow


@pytest.fixture(scope="module")
def risk_source(pg_url):
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(
        {
            "patient": np.arange(900),
            "ssn": [f"{i:09d}" for i in rng.permutation(900)],
            "zip": rng.integers(100, 130, 900),
            "sex": rng.choice(["f", "m"], 900),
        }
    )
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        frame.to_sql("risk_patients", conn, index=False, if_exists="replace")
    engine.dispose()
    return frame


def run_risk_dag(airflow_env, run_dag, tmp_path, dag_id: str, table_yaml: str = "", **operator_kwargs):
    """Put a one-task DAG file in the DAG folder (dag.test() runs only DAGs the dag-processor parsed)
    and run it for real."""
    config = tmp_path / f"{dag_id}.yaml"
    config.write_text(
        "source_conn_id: syndiffix_source\n"
        "target_conn_id: syndiffix_target\n"
        "tables:\n"
        "  - source: risk_patients\n"
        "    aid_columns: [patient]\n"
        "    risk:\n"
        "      quasi_identifiers: [[zip, sex]]\n" + table_yaml
    )
    dag_file = airflow_env.dags_folder / f"{dag_id}.py"
    dag_file.write_text(
        "import datetime as dt\n"
        "from airflow.sdk import DAG\n"
        "from syndiffix_ops.airflow.risk_operator import RiskReportOperator\n"
        f"with DAG({dag_id!r}, schedule=None, start_date=dt.datetime(2024, 1, 1), catchup=False):\n"
        f"    RiskReportOperator(task_id='risk', config_path={str(config)!r}, **{operator_kwargs!r})\n"
    )
    try:
        return run_dag(dag_id)
    finally:
        dag_file.unlink()


def test_the_operator_writes_the_coarse_report(airflow_env, run_dag, risk_source, tmp_path):
    output = tmp_path / "reports" / "risk.json"
    run = run_risk_dag(airflow_env, run_dag, tmp_path, "syndiffix_risk_report", output_path=str(output))
    assert run.state == "success"
    report = json.loads(output.read_text())
    column_sets = report["tables"]["risk_patients"]["column_sets"]
    assert set(column_sets) == {"ssn", "zip", "sex", "zip+sex"}
    assert column_sets["ssn"]["level"] == "identifying"
    counts = risk_source.groupby(["zip", "sex"])["patient"].nunique()
    assert column_sets["zip+sex"]["reidentification_potential"]["10"] == pytest.approx(
        (counts <= 10).mean(), abs=0.001
    )
    assert column_sets["zip+sex"]["distinct_ids"] == 900


@pytest.mark.parametrize(
    ("table_yaml", "state"),
    [("", "failed"), ("    columns: {ssn: drop}\n", "success")],
    ids=["with-ssn", "ssn-dropped"],
)
def test_the_operator_fails_exactly_when_a_column_set_is_identifying(
    airflow_env, run_dag, risk_source, tmp_path, table_yaml, state
):
    dag_id = f"syndiffix_risk_gate_{state}"
    run = run_risk_dag(airflow_env, run_dag, tmp_path, dag_id, table_yaml, fail_on_identifying=True)
    assert run.state == state
